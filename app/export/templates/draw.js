/* Draws each chart from the JSON spec stored beside it: the only code of the export
   besides plotly.js (its Content-Security-Policy allows these two scripts alone). */
(function () {
  'use strict';
  var config = {displaylogo: false, responsive: false,
                modeBarButtonsToRemove: ['toImage', 'sendDataToCloud']};
  var specs = document.querySelectorAll('script[type="application/json"][data-chart]');
  Array.prototype.forEach.call(specs, function (node) {
    var spec = JSON.parse(node.textContent);
    Plotly.newPlot(document.getElementById(node.dataset.chart), spec.data, spec.layout,
                   config);
  });
})();
