// kafka-monitor status page: the filter box narrows the listed groups as you type, and the
// page's main part refreshes itself every data-refresh seconds (no library; the page works
// without this script, just without live filtering and refresh).
"use strict";

function applyFilter() {
  const box = document.getElementById("q");
  if (!box) return;
  const needle = box.value.trim().toLowerCase();
  for (const row of document.querySelectorAll("tr.group-row")) {
    const name = (row.dataset.name + " " + row.dataset.cluster).toLowerCase();
    row.hidden = needle !== "" && !name.includes(needle);
  }
}

function bindFilter() {
  const box = document.getElementById("q");
  if (box) box.addEventListener("input", applyFilter);
}

async function refresh() {
  const main = document.getElementById("main");
  try {
    const response = await fetch(window.location.href, { headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById("main");
    if (!fresh) return;
    const box = document.getElementById("q");
    const typed = box ? box.value : null;
    const focused = box !== null && document.activeElement === box;
    const open = new Set([...main.querySelectorAll("details[open]")].map(
      (d) => d.closest("tr") && d.closest("tr").rowIndex));
    main.innerHTML = fresh.innerHTML;
    for (const d of main.querySelectorAll("details")) {
      const row = d.closest("tr");
      if (row && open.has(row.rowIndex)) d.open = true;
    }
    const stamp = doc.getElementById("updated");
    if (stamp) document.getElementById("updated").textContent = stamp.textContent;
    bindFilter();
    const newBox = document.getElementById("q");
    if (newBox && typed !== null) {
      newBox.value = typed;
      if (focused) newBox.focus();
    }
    applyFilter();
  } catch (e) {
    // The service is restarting or unreachable: keep what is shown, try again later.
  }
}

document.addEventListener("DOMContentLoaded", () => {
  bindFilter();
  applyFilter();
  const seconds = Number(document.getElementById("main").dataset.refresh || "0");
  if (seconds > 0) setInterval(refresh, seconds * 1000);
});
