/* The platforms page's winner matrix, built from its store (app/dashboard/pages/platforms.py):
 * plain DOM, every text set as textContent (never parsed as HTML). */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  platforms: {
    matrix: function (data) {
      const holder = document.getElementById('platforms-matrix-holder');
      if (!holder || !data) { return window.dash_clientside.no_update; }
      const table = document.createElement('table');
      table.id = 'platforms-matrix';
      table.className = 'grid-table platforms-table';
      const head = table.createTHead().insertRow();
      data.head.forEach(text => {
        const th = document.createElement('th');
        th.textContent = text;
        head.appendChild(th);
      });
      const body = table.createTBody();
      data.rows.forEach(([label, variant, cells]) => {
        const tr = body.insertRow();
        const first = tr.insertCell();
        first.className = 'case-id';
        first.textContent = label;
        tr.insertCell().textContent = variant;
        cells.forEach(([cls, text]) => {
          const td = tr.insertCell();
          if (cls) { td.className = cls; }
          td.textContent = text;
        });
      });
      holder.replaceChildren(table);
      return data.rows.length;
    },
  },
});
