"""Checks JSON against Grafana's schema as Grafana's own SDK models it
(grafana-foundation-sdk, its types for the current Grafana).

The SDK's models are generated from Grafana's schema: each class lists its
fields with their types, emits only the fields it knows (`to_json`), and
emits a required field even when it is unset. `problems(cls, data)` parses
`data` with `cls.from_json` (panel options, field configs and queries go to
the model of their panel or datasource plugin) and walks the model against
the JSON it came from:

* a key that the model has no field for is an error (the SDK would drop it);
* a required field that the JSON lacks is an error;
* every value must have its field's type: strings, integers, numbers,
  booleans, one of the enum's or literal's values, lists and objects of the
  right types; a query must be of a datasource plugin the SDK knows.

PrometheusAnnotationTarget adds to the SDK's Prometheus query the few fields
that a Prometheus annotation's query holds.
"""

import enum
import functools
import types
import typing

from deploytest import need

need("grafana_foundation_sdk", "grafana-foundation-sdk")
from grafana_foundation_sdk.cog import plugins, runtime  # noqa: E402
from grafana_foundation_sdk.models import prometheus  # noqa: E402

plugins.register_default_plugins()


class PrometheusAnnotationTarget(prometheus.Dataquery):
    """The target of a Prometheus annotation: a Prometheus query plus the
    annotation fields of Grafana's Prometheus plugin, which the SDK leaves
    out (its AnnotationQuery.target models the built-in Grafana source)."""

    step: typing.Optional[str]
    title_format: typing.Optional[str]
    text_format: typing.Optional[str]
    tag_keys: typing.Optional[str]
    use_value_for_time: typing.Optional[bool]
    EXTRA = {
        "step": "step",
        "titleFormat": "title_format",
        "textFormat": "text_format",
        "tagKeys": "tag_keys",
        "useValueForTime": "use_value_for_time",
    }

    @classmethod
    def from_json(cls, data):
        query = super().from_json(data)
        for key, attr in cls.EXTRA.items():
            setattr(query, attr, data.get(key))
        return query

    def to_json(self):
        payload = super().to_json()
        for key, attr in self.EXTRA.items():
            if getattr(self, attr) is not None:
                payload[key] = getattr(self, attr)
        return payload


def problems(cls, data):
    """Where `data` (parsed JSON) breaks the schema of the SDK model `cls`."""
    found = []
    try:
        model = cls.from_json(data)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        return [f"$: the SDK cannot parse it as {cls.__name__}: {e!r}"]
    _check_model(model, data, "$", found)
    return found


def _is_model(value):
    """Whether `value` is an instance of a generated SDK model."""
    return callable(getattr(value, "to_json", None)) and bool(_hints(type(value)))


@functools.cache
def _hints(cls):
    """The model's fields and their types (attribute name -> type)."""
    return typing.get_type_hints(cls)


@functools.cache
def _keys(cls):
    """(JSON key of each field, the JSON keys of the required fields).

    A blank instance (every field None) emits exactly the required keys; one
    field set to a marker shows which key that field is emitted under.
    """

    def blank():
        instance = cls.__new__(cls)
        for attr in _hints(cls):
            setattr(instance, attr, None)
        return instance

    required = frozenset(blank().to_json())
    key_of = {}
    for attr in _hints(cls):
        instance, marker = blank(), object()
        setattr(instance, attr, marker)
        key_of[attr] = next(k for k, v in instance.to_json().items() if v is marker)
    return key_of, required


def _check_model(model, data, path, found):
    """The JSON object `data` against the model the SDK parsed from it."""
    cls = type(model)
    if isinstance(model, runtime.UnknownDataquery):
        found.append(f"{path}: a query of no datasource plugin the SDK knows")
        return
    if not isinstance(data, dict):
        found.append(f"{path}: {cls.__name__} must be an object, not {data!r}")
        return
    key_of, required = _keys(cls)
    for key in sorted(data.keys() - set(key_of.values())):
        found.append(f"{path}.{key}: not a field of {cls.__module__.split('.')[-1]}.{cls.__name__}")
    for key in sorted(required - data.keys()):
        found.append(f"{path}.{key}: required by {cls.__name__}, missing")
    for attr, hint in _hints(cls).items():
        key = key_of[attr]
        if key in data:
            _check_value(getattr(model, attr), hint, data[key], f"{path}.{key}", found)


def _check_value(value, hint, data, path, found):
    """`value` is what the SDK parsed from `data`; both must fit `hint`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        _check_union(value, args, data, path, found)
    elif origin is typing.Literal:
        if data not in args:
            found.append(f"{path}: {data!r} is none of {list(args)}")
    elif origin is list:
        if not isinstance(data, list):
            found.append(f"{path}: must be a list, not {data!r}")
            return
        items = value if isinstance(value, list) and len(value) == len(data) else data
        for i, (item, item_data) in enumerate(zip(items, data)):
            _check_value(item, args[0], item_data, f"{path}[{i}]", found)
    elif origin is dict:
        if not isinstance(data, dict):
            found.append(f"{path}: must be an object, not {data!r}")
            return
        for key, item in data.items():
            _check_value(item, args[1], item, f"{path}.{key}", found)
    elif hint is object or hint is typing.Any:
        if _is_model(value):
            _check_model(value, data, path, found)
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        allowed = [m.value for m in hint]
        if isinstance(data, bool) or data not in allowed:
            found.append(f"{path}: {data!r} is none of {hint.__name__} {allowed}")
    elif hint in (str, bool, int, float):
        _check_scalar(hint, data, path, found)
    elif isinstance(hint, type) and isinstance(value, hint):
        _check_model(value, data, path, found)
    elif isinstance(hint, type) and isinstance(data, dict):
        # Fields the SDK keeps as parsed JSON (e.g. panel links): parse them.
        _check_model(hint.from_json(data), data, path, found)
    else:
        found.append(f"{path}: must be {getattr(hint, '__name__', hint)}, not {data!r}")


def _check_union(value, arms, data, path, found):
    """`data` must fit one of `arms` (None fits an Optional)."""
    if data is None and type(None) in arms:
        return
    arms = [a for a in arms if a is not type(None)]
    if len(arms) == 1:
        _check_value(value, arms[0], data, path, found)
        return
    # A model arm that the SDK already chose (e.g. Panel or RowPanel by type).
    chosen = [a for a in arms if isinstance(a, type) and isinstance(value, a) and _is_model(value)]
    if chosen:
        _check_model(value, data, path, found)
        return
    tries = []
    for arm in arms:
        arm_found = []
        _check_value(value, arm, data, path, arm_found)
        if not arm_found:
            return
        tries.extend(arm_found)
    found.append(f"{path}: fits none of its types: {'; '.join(tries)}")


def _check_scalar(hint, data, path, found):
    """JSON's types: a number is a float, an integer an int, neither a bool."""
    if hint is float:
        fits = isinstance(data, (int, float)) and not isinstance(data, bool)
    elif hint is int:
        fits = isinstance(data, int) and not isinstance(data, bool)
    else:
        fits = isinstance(data, hint)
    if not fits:
        found.append(f"{path}: must be {hint.__name__}, not {data!r}")
