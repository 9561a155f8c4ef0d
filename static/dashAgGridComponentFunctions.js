// Cell renderers for the case table. Values are set as text children (React escapes them);
// the link target is the row's href, which the server builds from ids it quotes itself.
var dagcomponentfuncs = (window.dashAgGridComponentFunctions =
  window.dashAgGridComponentFunctions || {});

dagcomponentfuncs.CaseLink = function (props) {
  return React.createElement("a", { href: props.data.href, className: "case-link" },
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
