// eagle3-convert registry site: sorting and filtering of the tables, and the charts (Vega, shipped beside this
// file). The pages are whole without it; names and notes are only ever set as text, never as markup.
"use strict";

function cellValue(row, index, numeric) {
  const cell = row.cells[index];
  const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
  return numeric ? parseFloat(raw) : raw.toLowerCase();
}

function makeSortable(table) {
  const headers = Array.from(table.tHead.rows[0].cells);
  headers.forEach((th, index) => {
    th.addEventListener("click", () => {
      const numeric = th.dataset.type === "num";
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      headers.forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
        return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
      });
      rows.forEach((row) => body.appendChild(row));
    });
  });
}

function setUpFilters(form, table) {
  const columns = Array.from(table.tHead.rows[0].cells).map((th) => th.dataset.col || null);
  const params = new URLSearchParams(window.location.search);
  for (const select of form.querySelectorAll("select")) {
    if (params.has(select.name)) select.value = params.get(select.name);
  }
  const apply = () => {
    const target = form.elements.target.value, engine = form.elements.engine.value;
    const verdict = form.elements.verdict.value;
    let shown = 0;
    for (const row of table.tBodies[0].rows) {
      let ok = !target || row.dataset.target === target;
      if (ok && verdict) {
        ok = columns.some((col, i) => col !== null && (!engine || col === engine) &&
                                      row.cells[i].dataset.verdict === verdict);
      }
      row.hidden = !ok;
      shown += ok ? 1 : 0;
    }
    document.getElementById("shown").textContent = `${shown} of ${table.tBodies[0].rows.length} shown`;
    const query = new URLSearchParams();
    for (const select of form.querySelectorAll("select")) if (select.value) query.set(select.name, select.value);
    const search = query.toString();
    window.history.replaceState(null, "", search ? `?${search}` : window.location.pathname);
  };
  form.addEventListener("change", apply);
  form.hidden = false;
  apply();
}

function drawCharts() {
  if (!window.vega || !window.vegaLite) return;  // the tables below each chart say the same
  for (const figure of document.querySelectorAll("figure.chart")) {
    const spec = JSON.parse(figure.querySelector("script.chart-spec").textContent);
    const view = new vega.View(vega.parse(vegaLite.compile(spec).spec),
                               {renderer: "svg", container: figure.querySelector(".chart-view"), hover: true});
    view.runAsync().then(() => figure.setAttribute("data-drawn", "true"),
                         (error) => figure.setAttribute("data-error", String(error)));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  const form = document.getElementById("filters"), table = document.getElementById("drafters");
  if (form && table) setUpFilters(form, table);
  drawCharts();
});
