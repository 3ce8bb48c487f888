// Sorting and filtering for the report's record tables: plain DOM, no framework, no network.
"use strict";

function cellValue(row, column) {
  const cell = row.cells[column];
  return cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
}

function compareRows(column, numeric, direction) {
  return (a, b) => {
    const x = cellValue(a, column);
    const y = cellValue(b, column);
    const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
    // Ties keep the log's order, so a sort is stable and reversible.
    return direction * order || Number(a.dataset.index) - Number(b.dataset.index);
  };
}

function searchText(row) {
  // What a filter matches: names, verdicts, diagnostics, assumptions; not the hidden sources.
  return Array.from(row.querySelectorAll(".searchable"), (node) => node.textContent)
    .join(" ")
    .toLowerCase();
}

function wireTable(table) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const texts = new Map(rows.map((row) => [row, searchText(row)]));
  const controls = document.querySelector(`[data-controls="${table.id}"]`);
  const search = controls.querySelector("input");
  const verdict = controls.querySelector("select");
  const count = controls.querySelector(".shown-count");

  function applyFilter() {
    const needle = search.value.trim().toLowerCase();
    let shown = 0;
    for (const row of rows) {
      const visible =
        (!verdict.value || row.dataset.verdict === verdict.value) &&
        (!needle || texts.get(row).includes(needle));
      row.hidden = !visible;
      shown += visible ? 1 : 0;
    }
    count.textContent = `${shown} of ${rows.length} shown`;
  }

  for (const header of table.tHead.querySelectorAll("th[data-sort]")) {
    header.querySelector("button").addEventListener("click", () => {
      const ascending = header.getAttribute("aria-sort") !== "ascending";
      for (const other of table.tHead.querySelectorAll("th[aria-sort]")) {
        other.removeAttribute("aria-sort");
      }
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const sorted = Array.from(body.rows).sort(
        compareRows(header.cellIndex, header.dataset.sort === "number", ascending ? 1 : -1),
      );
      body.append(...sorted);
    });
  }
  search.addEventListener("input", applyFilter);
  verdict.addEventListener("change", applyFilter);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.records")) {
    wireTable(table);
  }
});
