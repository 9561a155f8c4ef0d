/* The report page's charts after a filter change, drawn as the user sees them (as Grafana
 * draws its panels): plotly redraws a chart in the window at once; one within a window's
 * height of it right after, when the browser is idle (so the charts in sight show first);
 * one further away keeps its old figure, dimmed and marked "updating", until it comes near
 * (an IntersectionObserver) or the page is printed. Plotly's redraw of the ten charts was
 * half of a filter change's time, and at most three are in sight at once. The page's first
 * load draws every chart (app/dashboard/pages/report.py). */
(function () {
    const pending = new Map();  // graph id -> the figure it will show when near
    const MARGIN = '100% 0px';  // the viewport, grown by its height above and below
    const STALE = 'chart--stale';

    function inSight(graph) {
        const box = graph.getBoundingClientRect();
        return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight;
    }

    const later = window.requestIdleCallback
        || (callback => window.setTimeout(callback, 50));

    function frame(graph) {
        return graph.closest('.chart') || graph;
    }

    // The chart shows its current figure: nothing pending, not watched, not dimmed.
    function settle(id) {
        pending.delete(id);
        const graph = document.getElementById(id);
        if (graph) {
            observer().unobserve(graph);
            frame(graph).classList.remove(STALE);
        }
    }

    function draw(id) {
        const figure = pending.get(id);
        if (figure === undefined) { return; }
        settle(id);
        window.dash_clientside.set_props(id, {figure: figure});
    }

    let watcher = null;
    function observer() {
        // Its first report on a chart comes as soon as it is observed, so a chart that the
        // filter's own layout change (a shorter matrix) brought near is drawn then.
        watcher = watcher || new IntersectionObserver(entries => {
            entries.filter(e => e.isIntersecting).forEach(e => {
                const id = e.target.id;
                if (inSight(e.target)) { draw(id); } else { later(() => draw(id), {timeout: 1000}); }
            });
        }, {rootMargin: MARGIN});
        return watcher;
    }

    // A printed page shows every chart's current view. The print is laid out when this
    // handler returns, before dcc.Graph's own (asynchronous) redraw: plotly draws here too.
    window.addEventListener('beforeprint', () => Array.from(pending.entries()).forEach(
        ([id, figure]) => {
            const plot = document.querySelector('#' + id + ' .js-plotly-plot');
            if (plot && window.Plotly) { window.Plotly.react(plot, figure.data, figure.layout); }
            draw(id);
        }));

    window.dash_clientside = Object.assign({}, window.dash_clientside, {
        moescope_charts: {
            // Input: the figures that changed, by chart key; outputs: every chart's figure.
            draw_near: function (figures) {
                const context = window.dash_clientside.callback_context;
                return context.outputs_list.map(output => {
                    const id = output.id;
                    const figure = (figures || {})[id.replace('report-graph-', '')];
                    if (figure === undefined) { return window.dash_clientside.no_update; }
                    const graph = document.getElementById(id);
                    if (!graph || inSight(graph)) {
                        settle(id);
                        return figure;
                    }
                    pending.set(id, figure);
                    frame(graph).classList.add(STALE);
                    observer().observe(graph);
                    return window.dash_clientside.no_update;
                });
            },
        },
    });
})();
