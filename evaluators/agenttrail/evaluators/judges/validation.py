"""Check a parsed answer against the small JSON Schema subset judges use, naming the bad path.

Covers ``type``, ``properties``, ``required``, ``additionalProperties`` (false or a schema),
``items``, ``enum``, ``minimum``, ``maximum``, ``minItems``. Enough for judge answers, and the
message goes back to the model for its one repair, so it says exactly what is wrong.

>>> check_schema({"score": 2}, {"type": "object", "required": ["score", "reason"],
...     "properties": {"score": {"type": "number", "maximum": 1}, "reason": {"type": "string"}}})
Traceback (most recent call last):
...
ValueError: $: missing required key 'reason'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_answer(content: str) -> Any:
    """The JSON value in a model answer; a ```json fence around it is tolerated. ValueError if none."""
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc}); answer with one JSON object only") from None


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def check_schema(value: Any, schema: Mapping[str, Any], path: str = "$") -> None:
    """Raise ValueError naming the first place where `value` breaks `schema`."""
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, name) for name in names):
            raise ValueError(f"{path}: expected {' or '.join(names)}, got {json.dumps(value)[:80]}")
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError(
            f"{path}: expected one of {json.dumps(schema['enum'])}, got {json.dumps(value)[:80]}"
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ValueError(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ValueError(f"{path}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                raise ValueError(f"{path}: missing required key {key!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                check_schema(item, properties[key], f"{path}.{key}")
            elif extra is False:
                raise ValueError(f"{path}: unexpected key {key!r}; expected keys: {sorted(properties)}")
            elif isinstance(extra, Mapping):
                check_schema(item, extra, f"{path}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ValueError(f"{path}: expected at least {schema['minItems']} item(s)")
        if "items" in schema:
            for index, item in enumerate(value):
                check_schema(item, schema["items"], f"{path}[{index}]")
