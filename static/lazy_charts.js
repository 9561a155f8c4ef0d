/* The report page's charts after a filter change, drawn as the user sees them (as Grafana
 * draws its panels): plotly redraws a chart near the viewport (one viewport height above or
 * below) at once; a chart further away keeps its old figure, dimmed and marked "updating",
 * until it comes near (an IntersectionObserver) or the page is printed. Plotly's redraw of
 * the ten charts was half of a filter change's time, and at most two or three are in sight.
 * The page's first load draws every chart (app/dashboard/pages/report.py). */
(function () {
    const pending = new Map();  // graph id -> the figure it will show when near
    const MARGIN = '100% 0px';  // the viewport, grown by its height above and below
    const STALE = 'chart--stale';

    function near(graph) {
        const box = graph.getBoundingClientRect();
        const height = window.innerHeight;
        return box.height > 0 && box.bottom > -height && box.top < 2 * height;
    }

    function frame(graph) {
        return graph.closest('.chart') || graph;
    }

    function draw(id) {
        const figure = pending.get(id);
        if (figure === undefined) { return; }
        pending.delete(id);
        const graph = document.getElementById(id);
        if (graph) {
            observer().unobserve(graph);
            frame(graph).classList.remove(STALE);
        }
        window.dash_clientside.set_props(id, {figure: figure});
    }

    let watcher = null;
    function observer() {
        // Its first report on a chart comes as soon as it is observed, so a chart that the
        // filter's own layout change (a shorter matrix) brought near is drawn then.
        watcher = watcher || new IntersectionObserver(entries => {
            entries.filter(e => e.isIntersecting).forEach(e => draw(e.target.id));
        }, {rootMargin: MARGIN});
        return watcher;
    }

    // A printed page shows every chart's current view.
    window.addEventListener('beforeprint', () => Array.from(pending.keys()).forEach(draw));

    window.dash_clientside = Object.assign({}, window.dash_clientside, {
        moescope_charts: {
            // Inputs: each chart's figure store; outputs: the charts' figures, same order.
            draw_near: function (...figures) {
                const context = window.dash_clientside.callback_context;
                const changed = new Set(context.triggered.map(t => t.prop_id.split('.')[0]));
                return context.inputs_list.map((input, i) => {
                    const id = input.id.replace('report-figure-', 'report-graph-');
                    const graph = document.getElementById(id);
                    if (!changed.has(input.id) || figures[i] == null) {
                        return window.dash_clientside.no_update;
                    }
                    if (!graph || near(graph)) {
                        pending.delete(id);
                        if (graph) {
                            observer().unobserve(graph);
                            frame(graph).classList.remove(STALE);
                        }
                        return figures[i];
                    }
                    pending.set(id, figures[i]);
                    frame(graph).classList.add(STALE);
                    observer().observe(graph);
                    return window.dash_clientside.no_update;
                });
            },
        },
    });
})();
