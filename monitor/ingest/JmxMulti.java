import com.outlyer.jmx.jmxquery.JMXConnector;
import com.outlyer.jmx.jmxquery.JMXMetric;
import com.outlyer.jmx.jmxquery.ParseError;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import javax.management.MalformedObjectNameException;

/**
 * jmxquery for every broker of a cluster in one JVM: starting a JVM is the whole cost of a
 * jmxquery call, so one JVM per round instead of one per broker.
 *
 * <p>Each broker is queried on its own thread through jmxquery's own classes (its
 * {@code JMXConnector} and {@code JMXMetric} query syntax, all MBeans batched), and its answer is
 * printed as one line, {@code <broker id> TAB <epoch ms answered> TAB <JSON>}, where the JSON is
 * what {@code java -jar JMXQuery.jar -json} prints (the metric array, or
 * {@code {"error": kind, "message": ...}} with the jar's error kinds). A broker still silent at
 * the deadline gets {@code {"error": "timeout"}} and the JVM halts, abandoning its thread: a hung
 * broker costs the others nothing.
 *
 * <p>Input on stdin (never argv: credentials must not show in the process list): line 1 the
 * deadline in epoch milliseconds, then one line per broker, tab-separated: id, service URL,
 * base64 user name, base64 password (both empty for none), ';'-separated queries.
 */
public final class JmxMulti {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final Set<String> REPORTED = ConcurrentHashMap.newKeySet();

    private JmxMulti() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long deadline = Long.parseLong(in.readLine().trim());
        List<String[]> brokers = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isEmpty()) {
                brokers.add(line.split("\t", -1));
            }
        }
        List<Thread> threads = new ArrayList<>();
        for (String[] broker : brokers) {
            Thread thread = new Thread(() -> {
                try {
                    report(broker[0], query(broker));
                } catch (Throwable e) {
                    report(broker[0], error("general-exception", e.toString()));
                }
            }, "jmx-" + broker[0]);
            thread.setDaemon(true);
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            long wait = deadline - System.currentTimeMillis();
            if (wait > 0) {
                thread.join(wait);
            }
        }
        for (String[] broker : brokers) {
            report(broker[0], error("timeout", "no answer by the deadline"));
        }
        OUT.flush();
        // halt, not exit: a thread stuck in an RMI read must not hold the JVM open.
        Runtime.getRuntime().halt(0);
    }

    /** One jmxquery call for one broker: connect, query every metric, disconnect. */
    private static String query(String[] broker) {
        JMXConnector connector;
        try {
            List<JMXMetric> metrics = new ArrayList<>();
            for (String q : broker[4].split(";")) {
                if (!q.isEmpty()) {
                    metrics.add(new JMXMetric(q));
                }
            }
            connector = new JMXConnector(broker[1], decode(broker[2]), decode(broker[3]));
            try {
                StringBuilder json = new StringBuilder("[");
                for (JMXMetric metric : connector.getMetrics(new ArrayList<>(metrics))) {
                    metric.replaceTokens();
                    if (json.length() > 1) {
                        json.append(", ");
                    }
                    json.append(metric.toJSON().replace('\n', ' ').replace('\r', ' '));
                }
                return json.append("]").toString();
            } catch (IOException e) {
                return error("query-connection-error", e.getMessage());
            } catch (MalformedObjectNameException e) {
                return error("bad-query", e.getMessage());
            } finally {
                try {
                    connector.disconnect();
                } catch (IOException | RuntimeException ignored) {
                    // the answer is already in hand
                }
            }
        } catch (ParseError e) {
            return error("bad-query", e.getMessage());
        } catch (IOException e) {
            return error("connection-error", e.getMessage());
        } catch (Exception e) {
            return error("general-exception", e.toString());
        }
    }

    private static String decode(String base64) {
        return base64.isEmpty()
            ? null : new String(Base64.getDecoder().decode(base64), StandardCharsets.UTF_8);
    }

    /** Prints a broker's answer unless it already has one (the first answer wins). */
    private static void report(String id, String json) {
        if (REPORTED.add(id)) {
            synchronized (OUT) {
                OUT.println(id + "\t" + System.currentTimeMillis() + "\t" + json);
                OUT.flush();
            }
        }
    }

    private static String error(String kind, String message) {
        return "{\"error\": \"" + kind + "\", \"message\": \"" + escape(String.valueOf(message))
            + "\"}";
    }

    private static String escape(String s) {
        StringBuilder out = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
