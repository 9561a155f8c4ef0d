/* The platforms page's winner matrix and detail table, built from its store
 * (app/dashboard/pages/platforms.py): plain DOM, every text set as textContent (never parsed
 * as HTML). */
(function () {
  function headCell(row, text, span) {
    const th = document.createElement('th');
    th.textContent = text;
    if (span > 1) { th.colSpan = span; }
    row.appendChild(th);
    return th;
  }
  function bodyCells(tr, cells) {
    cells.forEach(([cls, text]) => {
      const td = tr.insertCell();
      if (cls) { td.className = cls; }
      td.textContent = text;
    });
  }
  // A row per configuration; a header row of platforms, each spanning its variants.
  function winners(data) {
    const table = document.createElement('table');
    table.id = 'platforms-matrix';
    table.className = 'grid-table platforms-table platforms-winners';
    const head = table.createTHead();
    const top = head.insertRow();
    headCell(top, 'configuration', 1).rowSpan = 2;
    data.platforms.forEach(([name, span]) => {
      headCell(top, name, span).className = 'platform-head';
    });
    const under = head.insertRow();
    data.variants.forEach((text, i) => {
      const th = headCell(under, text, 1);
      if (i % (data.variants.length / data.platforms.length) === 0) {
        th.className = 'platform-first';
      }
    });
    const body = table.createTBody();
    const per = data.variants.length / data.platforms.length;
    data.rows.forEach(([label, cells]) => {
      const tr = body.insertRow();
      const first = tr.insertCell();
      first.className = 'case-id';
      first.textContent = label;
      bodyCells(tr, cells);
      Array.from(tr.cells).slice(1).forEach((td, i) => {
        if (i % per === 0) { td.classList.add('platform-first'); }
      });
    });
    return table;
  }
  // A row per configuration and variant, a column per platform.
  function detail(data) {
    const table = document.createElement('table');
    table.id = 'platforms-detail';
    table.className = 'grid-table platforms-table';
    const head = table.createTHead().insertRow();
    data.head.forEach(text => headCell(head, text, 1));
    const body = table.createTBody();
    data.rows.forEach(([label, variant, cells]) => {
      const tr = body.insertRow();
      const first = tr.insertCell();
      first.className = 'case-id';
      first.textContent = label;
      tr.insertCell().textContent = variant;
      bodyCells(tr, cells);
    });
    return table;
  }
  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    platforms: {
      matrix: function (data) {
        const holder = document.getElementById('platforms-matrix-holder');
        const below = document.getElementById('platforms-detail-holder');
        if (!holder || !below || !data) { return window.dash_clientside.no_update; }
        holder.replaceChildren(winners(data.winners));
        below.replaceChildren(detail(data));
        return data.winners.rows.length;
      },
    },
  });
})();
