/* The report page's parts that are out of sight, drawn as the user comes to them (as
 * Grafana draws its panels). After a filter change plotly redraws a chart in the window at
 * once; one within a window's height of it right after, when the browser is idle (so the
 * charts in sight show first); one further away keeps its old figure, dimmed and marked
 * "updating", until it comes near (an IntersectionObserver) or the page is printed. The case
 * table below the charts is built once the charts are drawn and the browser is idle, and
 * asks for a filter's rows the way a chart takes its figure. Plotly's redraw was half of a
 * filter change's time and at most three charts are in sight at once; building the table
 * (ag-grid) cost the first load 0.3 s and updating it a filter change 0.12 s, unseen. The
 * page's first load draws every chart (app/dashboard/pages/report.py). */
(function () {
    const MARGIN = '100% 0px';  // the viewport, grown by its height above and below
    const STALE = 'stale';
    const waiting = new Map();  // element id -> {frame, show, print}
    const noUpdate = () => window.dash_clientside.no_update;

    function inSight(element) {
        const box = element.getBoundingClientRect();
        return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight;
    }

    const later = window.requestIdleCallback
        || (callback => window.setTimeout(callback, 50));

    // The element shows what it was last given: nothing waits, not watched, not dimmed.
    function settle(id) {
        const wait = waiting.get(id);
        waiting.delete(id);
        const element = document.getElementById(id);
        if (element) { observer().unobserve(element); }
        if (wait) { wait.frame.classList.remove(STALE); }
    }

    function show(id) {
        const wait = waiting.get(id);
        if (wait === undefined) { return; }
        settle(id);
        wait.show();
    }

    let watcher = null;
    function observer() {
        // Its first report on an element comes as soon as it is observed, so one that the
        // filter's own layout change (a shorter matrix) brought near is shown then.
        watcher = watcher || new IntersectionObserver(entries => {
            entries.filter(e => e.isIntersecting).forEach(e => {
                const id = e.target.id;
                if (inSight(e.target)) { show(id); } else { later(() => show(id), {timeout: 1000}); }
            });
        }, {rootMargin: MARGIN});
        return watcher;
    }

    // ``element`` (its ``frame`` dimmed meanwhile) calls ``showIt`` when it comes near, or
    // ``print`` (synchronously: the print is laid out when the handler returns) then
    // ``showIt`` before the page is printed. A later call replaces an earlier one.
    function whenNear(element, frame, showIt, print) {
        waiting.set(element.id, {frame: frame, show: showIt, print: print});
        frame.classList.add(STALE);
        observer().observe(element);
    }

    window.addEventListener('beforeprint', () => Array.from(waiting.entries()).forEach(
        ([id, wait]) => { wait.print(); show(id); }));

    function chartsDrawn() {
        const charts = document.querySelectorAll('#report-charts .chart').length;
        const drawn = Array.from(document.querySelectorAll('#report-charts .js-plotly-plot'))
            .filter(g => g._fullData && g.querySelector('.main-svg')).length;
        return drawn >= charts;
    }

    window.dash_clientside = Object.assign({}, window.dash_clientside, {
        moescope_lazy: {
            // Input: the figures that changed, by chart key; outputs: every chart's figure.
            draw_near: function (figures) {
                const context = window.dash_clientside.callback_context;
                return context.outputs_list.map(output => {
                    const id = output.id;
                    const figure = (figures || {})[id.replace('report-graph-', '')];
                    if (figure === undefined) { return noUpdate(); }
                    const graph = document.getElementById(id);
                    if (!graph || inSight(graph)) {
                        settle(id);
                        return figure;
                    }
                    whenNear(graph, graph.closest('.chart') || graph,
                             () => window.dash_clientside.set_props(id, {figure: figure}),
                             () => {
                                 const plot = graph.querySelector('.js-plotly-plot');
                                 if (plot && window.Plotly) {
                                     window.Plotly.react(plot, figure.data, figure.layout);
                                 }
                             });
                    return noUpdate();
                });
            },

            // The table is wanted once every chart is drawn (or after 5 s) and the browser
            // is idle: it is then built (a server callback) below the charts, unseen.
            table_wanted: async function () {
                const start = performance.now();
                while (!chartsDrawn() && performance.now() - start < 5000) {
                    await new Promise(resolve => setTimeout(resolve, 50));
                }
                await new Promise(resolve => later(resolve, {timeout: 1000}));
                return true;
            },

            // A filter changed the view (its query, the input): the table asks for its rows
            // (a server callback) at once when in sight, else when it comes near (or before
            // printing). Before the table is built, nothing: it is built with them.
            rows_near: function (search) {
                const grid = document.getElementById('report-grid');
                const wanted = {search: search, at: Date.now()};
                if (!grid) { return noUpdate(); }
                if (inSight(grid)) {
                    settle(grid.id);
                    return wanted;
                }
                whenNear(grid, document.getElementById('report-table') || grid,
                         () => window.dash_clientside.set_props('report-rows-wanted',
                                                                {data: wanted}),
                         () => {});
                return noUpdate();
            },
        },
    });
})();
