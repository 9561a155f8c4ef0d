// Cell renderers for the case table. Values are set as text children (React escapes them).
var dagcomponentfuncs = (window.dashAgGridComponentFunctions =
  window.dashAgGridComponentFunctions || {});

// The case page of a row: this page's own report id (digits only) and the case id
// percent-encoded whole, so no id can leave /reports/<id>/cases/. Built here rather than
// sent with every row of a large report.
dagcomponentfuncs.CaseLink = function (props) {
  var report = window.location.pathname.match(/^\/reports\/(\d+)/);
  var href = report ? "/reports/" + report[1] + "/cases/" +
    encodeURIComponent(String(props.value)) : undefined;
  return React.createElement("a", { href: href, className: "case-link" },
    String(props.value));
};

dagcomponentfuncs.CaveatBadges = function (props) {
  var codes = String(props.value || "").split(" ").filter(Boolean);
  return React.createElement("span", { className: "badges" }, codes.map(function (code) {
    return React.createElement("span", {
      key: code, className: "badge badge-" + code.replace(/[^a-z_]/g, ""),
    }, code);
  }));
};

// The case table's numbers: integers in full (F=12288, not 1.229e+4), others to 4
// significant digits, never in exponent notation. d3's ",.4~g" turned every value of
// 10,000 or more into an exponent, rounding a configuration's F away.
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});

dagfuncs.caseNumber = function (value) {
  if (value == null || typeof value !== "number") {
    return value == null ? "" : String(value);
  }
  return Number.isInteger(value) ? value.toLocaleString("en-US")
    : value.toLocaleString("en-US", { maximumSignificantDigits: 4 });
};

// A case's layer-time change against its history, linking to its history page. The href
// is built by the server (/history?... from the report's own ids and GPU, URL-encoded).
dagcomponentfuncs.HistoryTrend = function (props) {
  var row = props.data || {};
  if (!row.historyHref || String(row.historyHref).indexOf("/history?") !== 0) {
    return null;
  }
  var status = String(row.historyStatus || "").replace(/[^a-z_]/g, "");
  var arrow = status === "regression" ? "\u25b2 " : status === "improvement" ? "\u25bc " : "";
  var text = typeof props.value === "number"
    ? arrow + (props.value > 0 ? "+" : "") + props.value.toFixed(1) + " %"
    : "too few reports";
  return React.createElement("a", { href: row.historyHref, className: "trend trend-" + status },
    text);
};

// A case's configuration in one cell, as an engineer says it: training · EP32 · mxfp8 ·
// staged · F3072 · i4 (the case table's "configuration" column; its parts stay filterable
// on the page's filters).
dagfuncs.configuration = function (row) {
  if (!row) {
    return "";
  }
  var parts = [row.mode, row.ep == null ? null : "EP" + row.ep, row.precision, row.pipeline,
    row.F == null ? null : "F" + row.F, row.imbalance == null ? null : "i" + row.imbalance];
  return parts.filter(function (p) { return p != null && p !== ""; }).join(" \u00b7 ");
};
