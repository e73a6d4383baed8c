"""Turn grafanalib's JSON into a dashboard that validates against Grafana's own schema.

grafanalib 0.7.1 still writes parts of the pre-Grafana-5 model: `rows`, `style`,
`sharedCrosshair`, `__inputs`, panel `span`/`height`, `null` where Grafana wants a string or
nothing, datasources as bare names, legacy threshold objects. Every fix lives here, in one pure
function, so the builders stay plain grafanalib and the output is the model Grafana's
provisioning reads (`../shared/schemas/grafana/dashboard.jsonschema.json`).
"""

from __future__ import annotations

import json
from typing import Any

from grafanalib._gen import DashboardEncoder

# Dashboard keys from Grafana < 5 (or grafana.com export wrappers) that the v1 model rejects.
LEGACY_DASHBOARD_KEYS = frozenset({"__inputs", "rows", "style", "sharedCrosshair", "hideControls"})
# Replaced by `quick_ranges` in the time picker.
LEGACY_TIMEPICKER_KEYS = frozenset({"time_options"})
# Panel keys of the old span-based layout, or of the pre-8 table panel.
LEGACY_PANEL_KEYS = frozenset(
    {"editable", "error", "height", "minSpan", "span", "color", "columns", "fontSize", "styles"}
)
# A row panel only holds its title, collapse state, position and nested panels.
ROW_KEYS = frozenset(
    {"type", "collapsed", "title", "datasource", "gridPos", "id", "panels", "repeat"}
)
# The Prometheus query model (prometheus.jsonschema.json, Dataquery). grafanalib's Target also
# writes Graphite-era `target`, `metric`, `query` and `step`.
PROMETHEUS_TARGET_KEYS = frozenset(
    {
        "adhocFilters",
        "datasource",
        "editorMode",
        "exemplar",
        "expr",
        "format",
        "groupByKeys",
        "hide",
        "instant",
        "intervalFactor",
        "intervalMs",
        "legendFormat",
        "maxDataPoints",
        "queryType",
        "range",
        "refId",
        "resultAssertions",
        "scopes",
        "timeRange",
        "interval",
    }
)
# Template variable keys Grafana dropped (tag-based variables were removed in Grafana 8).
LEGACY_VARIABLE_KEYS = frozenset({"useTags", "tagsQuery", "tagValuesQuery"})
INTERVAL_VARIABLE_KEYS = frozenset({"auto", "auto_min", "auto_count"})

# Required panel options that grafanalib's builders do not write; values are Grafana's defaults.
OPTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "stat": {"wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"},
    "table": {"frameIndex": 0, "showHeader": True},
}


def normalize_dashboard(raw: dict, datasource_type: str = "prometheus") -> dict:
    """A schema-valid copy of grafanalib's `Dashboard.to_json_data()` (already JSON-encoded).

    `datasource_type` is the plugin type given to datasources that grafanalib wrote as a bare
    name or uid (such as "${datasource}"), since Grafana wants `{type, uid}`.
    """
    return _normalized(_drop_nulls(raw), datasource_type)  # new dicts and lists: `raw` stays


def normalized_grafanalib(dashboard: Any, datasource_type: str = "prometheus") -> dict:
    """`normalize_dashboard(grafanalib_json(dashboard))` in one pass over grafanalib's data
    rather than three (plain data, nulls dropped, normalised)."""
    return _normalized(_plain(dashboard.to_json_data(), drop_nulls=True), datasource_type)


def _normalized(dashboard: dict, datasource_type: str) -> dict:
    """normalize_dashboard's work on a dashboard already without nulls (changed in place)."""
    for key in LEGACY_DASHBOARD_KEYS:
        dashboard.pop(key, None)
    if "timepicker" in dashboard:
        dashboard["timepicker"] = _without(dashboard["timepicker"], LEGACY_TIMEPICKER_KEYS)
    dashboard["panels"] = [_panel(p, datasource_type) for p in dashboard.get("panels", [])]
    templating = dashboard.setdefault("templating", {})
    templating["list"] = [_variable(v, datasource_type) for v in templating.get("list", [])]
    annotations = dashboard.setdefault("annotations", {})
    annotations["list"] = [
        _with_datasource_ref(a, datasource_type) for a in annotations.get("list", [])
    ]
    return dashboard


def _drop_nulls(value: Any) -> Any:
    """grafanalib writes `null` for every unset attribute; Grafana means "absent" by it."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value if v is not None]
    return value


def _without(obj: dict, keys: frozenset[str]) -> dict:
    return {k: v for k, v in obj.items() if k not in keys}


def _datasource_ref(value: Any, datasource_type: str) -> dict:
    if isinstance(value, str):
        return {"type": datasource_type, "uid": value}
    return value


def _with_datasource_ref(obj: dict, datasource_type: str) -> dict:
    if "datasource" in obj:
        obj = {**obj, "datasource": _datasource_ref(obj["datasource"], datasource_type)}
    return obj


def _panel(panel: dict, datasource_type: str) -> dict:
    panel = _with_datasource_ref(panel, datasource_type)
    if panel.get("type") == "row":
        row = {k: v for k, v in panel.items() if k in ROW_KEYS}
        row.setdefault("collapsed", False)
        row["panels"] = [_panel(p, datasource_type) for p in row.get("panels", [])]
        return row

    panel = _without(panel, LEGACY_PANEL_KEYS)
    field_config = panel.setdefault("fieldConfig", {})
    field_config.setdefault("overrides", [])
    defaults = field_config.setdefault("defaults", {})
    # The pre-8 table kept value mappings on the panel; they belong to the field defaults now.
    mappings = panel.pop("mappings", None)
    if mappings:
        defaults.setdefault("mappings", mappings)
    if "thresholds" in defaults:
        defaults["thresholds"] = _thresholds(defaults["thresholds"])
    for override in field_config["overrides"]:
        for prop in override.get("properties", []):
            if prop.get("id") == "thresholds" and "value" in prop:
                prop["value"] = _thresholds(prop["value"])
    if not panel.get("repeat"):
        panel = _without(panel, frozenset({"repeat", "repeatDirection", "maxPerRow"}))
    panel["targets"] = [
        _with_datasource_ref(
            {k: v for k, v in t.items() if k in PROMETHEUS_TARGET_KEYS}, datasource_type
        )
        for t in panel.get("targets", [])
    ]
    options = panel.setdefault("options", {})
    for key, default in OPTION_DEFAULTS.get(panel.get("type", ""), {}).items():
        options.setdefault(key, default)
    if panel.get("type") == "timeseries" and "legend" in options:
        options["legend"].setdefault("showLegend", options["legend"].get("displayMode") != "hidden")
    if panel.get("type") == "table":
        # `inspect` is required by the table's field options; Grafana's default is off.
        defaults.setdefault("custom", {}).setdefault("inspect", False)
    return panel


def _thresholds(config: dict) -> dict:
    """grafanalib's Threshold (`op`, `index`, `line`, `yaxis`, value "null") -> {color, value}."""
    steps = config.get("steps")
    if not isinstance(steps, list):  # Stat's default is an empty string
        steps = []
    clean = []
    for i, step in enumerate(steps):
        value = step.get("value")
        # The base step has no value (-Infinity); grafanalib writes the string "null" there.
        if i == 0 or not isinstance(value, int | float):
            value = None
        clean.append({"color": step["color"], "value": value})
    return {"mode": config.get("mode", "absolute"), "steps": clean}


def _variable(variable: dict, datasource_type: str) -> dict:
    variable = _with_datasource_ref(_without(variable, LEGACY_VARIABLE_KEYS), datasource_type)
    if variable.get("type") != "interval":
        variable = _without(variable, INTERVAL_VARIABLE_KEYS)
    current = variable.get("current")
    if current is not None:
        current = {k: v for k, v in current.items() if k in ("selected", "text", "value")}
        # No default chosen: leave `current` out and let Grafana pick the first option.
        if "text" in current and "value" in current:
            variable["current"] = current
        else:
            del variable["current"]
    variable["options"] = [
        {k: v for k, v in o.items() if k in ("selected", "text", "value")}
        for o in variable.get("options", [])
    ]
    if variable.get("type") == "query" and isinstance(variable.get("query"), str):
        variable.setdefault("definition", variable["query"])
    return variable


def grafanalib_json(dashboard: Any) -> dict:
    """grafanalib's Dashboard as plain JSON data (before normalising)."""
    return _plain(dashboard.to_json_data())


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any, drop_nulls: bool = False) -> Any:
    """`json.loads(json.dumps(value, cls=DashboardEncoder))` without writing the text: new
    dicts and lists, grafanalib objects as their `to_json_data()`. Anything else (a dict with
    keys other than strings, a subclass of a JSON type) takes the JSON round trip itself.
    `drop_nulls`: and then `_drop_nulls` of that, in the same pass.

    Plain loops rather than comprehensions over generators (17% faster on a dashboard's
    ~4,700 values); scalars, most of them, are kept in place rather than passed down."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return _round_trip(value, drop_nulls)
            if type(item) not in _SCALARS:
                item = _plain(item, drop_nulls)
            if item is not None or not drop_nulls:
                out[key] = item
        return out
    if kind is list or kind is tuple:
        items = []
        for item in value:
            if type(item) not in _SCALARS:
                item = _plain(item, drop_nulls)
            if item is not None or not drop_nulls:
                items.append(item)
        return items
    if hasattr(value, "to_json_data") and not isinstance(value, (*_SCALARS, dict, list, tuple)):
        return _plain(value.to_json_data(), drop_nulls)
    return _round_trip(value, drop_nulls)


def _round_trip(value: Any, drop_nulls: bool) -> Any:
    data = json.loads(json.dumps(value, cls=DashboardEncoder))
    return _drop_nulls(data) if drop_nulls else data
