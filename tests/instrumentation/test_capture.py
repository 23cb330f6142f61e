"""Captured values: safe JSON, scrubbing before truncation, marked truncation, the redact hook."""

import json
import logging
import math
import re
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.util.types import AttributeValue

from agenttrail.instrumentation import agent, agent_run, configure, tool
from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._capture import (
    _SCALAR_JSON,
    CIRCULAR,
    DEFAULT_KEY_PATTERNS,
    REDACTED,
    REDACTION_FAILED,
    _encode,
    arguments_templates,
    capture_arguments_into,
    capture_into,
    make_settings,
    to_json,
    truncation_marker,
)
from agenttrail.instrumentation._scrubbing import ANY_HINT, ANY_HINT_WORDS, KEY_HINT, KEY_HINT_WORDS
from agenttrail.instrumentation.testing import CapturedSpans


def strict_loads(text: str) -> Any:
    """json.loads that, unlike the default, rejects NaN and Infinity (not JSON)."""

    def reject(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=reject)


def render(value: object, **options: Any) -> tuple[str, dict[str, AttributeValue]]:
    """The text capture_into() stores for ``value``, and every attribute it set."""
    attrs: dict[str, AttributeValue] = {}
    capture_into(attrs, make_settings(**options), "arguments", "search", value, ("k",))
    return str(attrs["k"]), attrs


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_json_is_compact_and_keeps_unicode() -> None:
    """Values serialise as compact JSON without escaping non-ASCII text."""
    assert to_json({"q": "café ☕", "n": [1, 2.5, None, True]}) == '{"q":"café ☕","n":[1,2.5,null,true]}'


def test_non_json_values_use_repr() -> None:
    """Objects, bytes, sets and tuples-as-keys become their repr() inside otherwise valid JSON."""
    value = {"obj": Opaque(), "raw": b"\x00ab", "tags": {1}, (1, 2): "tuple key"}
    assert strict_loads(to_json(value)) == {
        "obj": "Opaque()",
        "raw": "b'\\x00ab'",
        "tags": "{1}",
        "(1, 2)": "tuple key",
    }


def test_unserialisable_values_never_raise() -> None:
    """Cycles, broken __repr__, NaN, huge ints and deep nesting give placeholders, not exceptions."""
    cycle: list[Any] = [1]
    cycle.append(cycle)
    deep: list[Any] = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    huge = 10 ** (sys.get_int_max_str_digits() + 1)
    value = {"cycle": cycle, "broken": BrokenRepr(), "nan": math.nan, "inf": -math.inf, "huge": huge}
    decoded = strict_loads(to_json(value))
    assert decoded["cycle"] == [1, CIRCULAR]
    assert decoded["broken"] == "<unrepresentable BrokenRepr>"
    assert (decoded["nan"], decoded["inf"]) == ("nan", "-inf")
    assert decoded["huge"] == "<unrepresentable int>"
    assert "[too deep]" in to_json(deep)


def test_truncation_is_marked() -> None:
    """A value longer than the cap is cut and ends with a marker saying how much was dropped."""
    text, attrs = render("x" * 100, max_value_length=20)
    full = json.dumps("x" * 100)
    assert text == full[:20] + truncation_marker(len(full) - 20)
    assert text.endswith("…[truncated 82 chars]")
    assert attrs[attr.AGENTTRAIL_TRUNCATED] == ("k",)


def test_value_at_the_cap_is_not_truncated() -> None:
    """A value exactly at the cap is kept whole and not reported as truncated."""
    text, attrs = render("x" * 18, max_value_length=20)
    assert text == json.dumps("x" * 18)
    assert attr.AGENTTRAIL_TRUNCATED not in attrs


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_passwd",
        "PWD",
        "client_secret",
        "api_key",
        "X-Api-Key",
        "apikey",
        "private_key",
        "session_key",
        "access_token",
        "Authorization",
        "auth",
        "credentials",
        "Set-Cookie",
        "jwt",
        "csrf",
        "credit_card",
    ],
)
def test_secret_keys_are_scrubbed(key: str) -> None:
    """Values under secret-looking keys, at any depth, become [REDACTED] and the span says so."""
    text, attrs = render({"outer": [{key: "hunter2", "user": "ann"}]})
    assert strict_loads(text) == {"outer": [{key: REDACTED, "user": "ann"}]}
    assert attrs[attr.AGENTTRAIL_SCRUBBED] == (f"k: $.outer[0].{key}",)


@pytest.mark.parametrize(
    "key", ["max_tokens", "input_tokens", "token_count", "tokenizer", "author", "query", "session_id"]
)
def test_ordinary_llm_keys_are_kept(key: str) -> None:
    """Everyday keys that merely contain a secret word (max_tokens, author) are not scrubbed."""
    text, attrs = render({key: 5})
    assert strict_loads(text) == {key: 5}
    assert attr.AGENTTRAIL_SCRUBBED not in attrs


@pytest.mark.parametrize(
    "secret",
    [
        "Bearer abcdefghijklmnopqrstuvwxyz012345",
        "sk-proj-abcdefghijklmnopqrstuv",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "AKIAABCDEFGHIJKLMNOP",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_secret_looking_strings_are_scrubbed(secret: str) -> None:
    """Token-shaped strings are replaced wherever they appear, even inside repr() text; JSON stays valid."""
    text, attrs = render({"note": f"header is {secret} ok", "obj": [Opaque(), f"<{secret}>"]})
    assert secret not in text
    assert strict_loads(text)["note"] == f"header is {REDACTED} ok"
    assert attrs[attr.AGENTTRAIL_SCRUBBED]


def test_scrubbing_happens_before_truncation() -> None:
    """A secret straddling the cut is still fully removed: scrubbing runs on the whole value first."""
    # Cut first, the 10 characters of key left would be too short to recognise, and would leak.
    text, attrs = render({"note": "x" * 10 + " sk-" + "a" * 40}, max_value_length=30)
    assert text == '{"note":"xxxxxxxxxx [REDACTED]' + truncation_marker(2)
    assert attrs[attr.AGENTTRAIL_SCRUBBED] == ("k: OpenAI key",)


def test_extra_scrub_patterns_apply_to_keys() -> None:
    """scrub_patterns add key patterns, anchored ones included."""
    text, _ = render({"pin": 1234, "pinned": True}, scrub_patterns=[r"^pin$"])
    assert strict_loads(text) == {"pin": REDACTED, "pinned": True}


def test_redact_hook_runs_first_with_kind_and_name() -> None:
    """The redact hook gets (kind, name, value) and its return value is what gets scrubbed and stored."""
    seen: list[tuple[str, str]] = []

    def redact(kind: str, name: str, value: Any) -> Any:
        seen.append((kind, name))
        return {**value, "email": "***", "token": "still scrubbed"}

    text, _ = render({"email": "ann@example.com"}, redact=redact)
    assert seen == [("arguments", "search")]
    assert strict_loads(text) == {"email": "***", "token": REDACTED}


def test_failing_redact_hook_fails_closed(tolerant: None, caplog: pytest.LogCaptureFixture) -> None:
    """A raising redact hook records [REDACTION FAILED] instead of the raw value, and logs it."""

    def redact(kind: str, name: str, value: Any) -> Any:
        raise KeyError("bug in hook")

    text, _ = render({"ssn": "123-45-6789"}, redact=redact)
    assert strict_loads(text) == REDACTION_FAILED
    assert "redact hook" in caplog.text


def test_default_key_patterns_all_have_a_hint() -> None:
    """Every default key pattern is found by the cheap whole-text pre-check (no silent gaps)."""
    examples = [
        "password",
        "pwd",
        "secret",
        "api_key",
        "private_key",
        "session_key",
        "token",
        "authorization",
    ]
    examples += ["auth", "credential", "cookie", "jwt", "xsrf", "credit_card"]
    assert len(examples) == len(DEFAULT_KEY_PATTERNS)
    for key in examples:
        _, attrs = render({key: "v"})
        assert attrs.get(attr.AGENTTRAIL_SCRUBBED) == (f"k: $.{key}",), key


# Anything a tool might be handed: JSON types, NaN/inf, bytes, arbitrary objects, token-like text.
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=20)
    | st.builds(Opaque)
    | st.builds(BrokenRepr)
    | st.from_regex(r"(Bearer |sk-)[A-Za-z0-9]{16,24}", fullmatch=True)
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(
            st.text(max_size=8) | st.integers() | st.sampled_from(["password", "token"]), children
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=values, cap=st.integers(min_value=1, max_value=200))
def test_serializer_property(value: object, cap: int) -> None:
    """Any value renders without raising to valid JSON within the cap, or a cut text with the marker."""
    strict_loads(to_json(value))  # uncut, the serializer's output is always valid JSON
    text, attrs = render(value, max_value_length=cap)
    if attr.AGENTTRAIL_TRUNCATED in attrs:
        head, marker, _ = text.rpartition("…[truncated ")
        assert marker
        assert len(head) == cap
        assert text.endswith(" chars]")
        cut = int(text[len(head) + len(marker) : -len(" chars]")])
        assert len(text) == cap + len(truncation_marker(cut))
    else:
        assert len(text) <= cap
        strict_loads(text)


def test_capture_off_records_nothing(captured: CapturedSpans) -> None:
    """configure(capture=False) and per-decorator capture=False record no arguments, results or I/O."""
    configure(tracer_provider=captured.provider, capture=False)

    @tool
    def lookup(order_id: int) -> str:
        return "shipped"

    @agent
    def support(question: str) -> str:
        return lookup(1)

    support("q")
    configure(tracer_provider=captured.provider)

    @tool(capture=False)
    def private(ssn: str) -> str:
        return ssn

    private("123")
    captured_keys = {
        attr.INPUT_VALUE,
        attr.OUTPUT_VALUE,
        attr.GEN_AI_TOOL_CALL_ARGUMENTS,
        attr.GEN_AI_TOOL_CALL_RESULT,
        attr.INPUT_MIME_TYPE,
    }
    for span in captured.spans:
        assert not captured_keys & set(span.attributes or {}), span.name


def test_spans_report_truncation_and_scrubbing(captured: CapturedSpans) -> None:
    """On spans, agenttrail.truncated lists the cut attributes and agenttrail.scrubbed marks redaction."""
    configure(tracer_provider=captured.provider, max_value_length=40)

    @tool
    def login(user: str, password: str) -> str:
        return "y" * 100

    login("ann", password="hunter2")
    attributes = captured.one("execute_tool login").attributes or {}
    assert strict_loads(str(attributes[attr.GEN_AI_TOOL_CALL_ARGUMENTS])) == {
        "user": "ann",
        "password": REDACTED,
    }
    assert attributes[attr.AGENTTRAIL_SCRUBBED] == (
        f"{attr.GEN_AI_TOOL_CALL_ARGUMENTS}: $.password",
        f"{attr.INPUT_VALUE}: $.password",
    )
    assert str(attributes[attr.OUTPUT_VALUE]).endswith("…[truncated 62 chars]")
    assert attributes[attr.AGENTTRAIL_TRUNCATED] == (attr.GEN_AI_TOOL_CALL_RESULT, attr.OUTPUT_VALUE)


def test_redact_hook_sees_each_kind_on_spans(captured: CapturedSpans) -> None:
    """The hook is called with arguments/result for tools and input/output for agents, by name."""
    calls: list[tuple[str, str]] = []

    def redact(kind: str, name: str, value: Any) -> Any:
        calls.append((kind, name))
        return value

    configure(tracer_provider=captured.provider, redact=redact)

    @tool
    def lookup() -> int:
        return 1

    with agent_run("planner", input="q") as run:
        lookup()
        run.set_output("a")
    assert calls == [
        ("input", "planner"),
        ("arguments", "lookup"),
        ("result", "lookup"),
        ("output", "planner"),
    ]


def test_raising_redact_hook_does_not_break_the_tool(
    captured: CapturedSpans, tolerant: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook that raises under capture leaves the tool's return value intact and fails closed on the span."""

    def redact(kind: str, name: str, value: Any) -> Any:
        raise RuntimeError("hook bug")

    configure(tracer_provider=captured.provider, redact=redact)

    @tool
    def lookup(secret_plan: str) -> str:
        return "result"

    with caplog.at_level(logging.ERROR, logger="agenttrail.instrumentation"):
        assert lookup("launch codes") == "result"
    attributes = captured.one("execute_tool lookup").attributes or {}
    assert attributes[attr.INPUT_VALUE] == attributes[attr.OUTPUT_VALUE] == json.dumps(REDACTION_FAILED)
    assert "launch codes" not in str(dict(attributes))


@given(st.text(alphabet="passwordkeytokenauthcredcookiejwtsrfbearer-ghpubxoxakiaeyj_ :/@", max_size=40))
def test_secret_hint_scan_finds_exactly_its_words(text: str) -> None:
    """The grouped pre-scan regex matches a text iff one of the hint words occurs in it."""
    words = re.compile("|".join(ANY_HINT_WORDS))
    assert bool(ANY_HINT.search(text)) == bool(words.search(text))
    key_words = re.compile("|".join(KEY_HINT_WORDS))
    assert [m.span() for m in KEY_HINT.finditer(text)] == [m.span() for m in key_words.finditer(text)]


# The fast path for a decorated call's positional arguments (capture_arguments_into) against the
# general one (capture_into of the bound dict): the same attributes, byte for byte.
secretish_text = st.sampled_from(
    [
        "password=hunter2",
        "login with PASSWORD: hunter2",
        "Authorization: Bearer abc123def",
        "Basic YW5uOmh1bnRlcjI=",
        "\x08asic YW5uOmh1bnRlcjI=",  # JSON writes \b: "\basic" is only a hint word once encoded
        "\token=abc",
        "https://ann:hunter2@db/x",
        "a://\n:b@c",
        "sk-proj-abcdefghijklmnopqrstuv",
        "the token count was 812",
        'quote " and \\ backslash',
        "Kelvin \u212aEY=1",
        "ΑΣ café ☕",
    ]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.just(10**5000)  # past the int-to-str digit limit: the encoder refuses it
    | st.floats()
    | st.text()
    | st.text(alphabet='passwordkeytokenauthbearer =:/@"\\\n\t\x08\x1b', max_size=30)
    | secretish_text
    | secretish_text.map(str.upper)
)
non_scalars = st.builds(Opaque) | st.lists(scalars, max_size=2) | st.builds(lambda: 1.5 + 0j)
# One value in ten not a scalar: most calls take the fast path, the rest its fallback.
argument_values = st.integers(0, 9).flatmap(lambda i: non_scalars if i == 0 else scalars)
parameter_names = st.lists(
    st.sampled_from(["query", "limit", "x", "café", "secretary", "password", "api_key", "token_count", "pin"])
    | st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    max_size=4,
    unique=True,
)


@settings(max_examples=400, deadline=None)
@given(
    names=parameter_names,
    data=st.data(),
    cap=st.sampled_from([8192, 1, 12, 40]),
    options=st.sampled_from(
        [{}, {"scrub_patterns": [r"^pin$"]}, {"redact": lambda kind, name, value: value}]
    ),
)
def test_positional_fast_path_stores_what_the_general_path_does(
    names: list[str], data: st.DataObject, cap: int, options: dict[str, Any]
) -> None:
    """capture_arguments_into() stores exactly what capture_into() of the bound arguments does, or
    nothing (returning False) so the caller takes capture_into()."""
    args = tuple(data.draw(st.lists(argument_values, max_size=len(names) + 1)))
    capture_settings = make_settings(max_value_length=cap, **options)
    bound = dict(zip(names, args, strict=False))
    keys = ("a", "b")
    general: dict[str, AttributeValue] = {}
    capture_into(general, capture_settings, "arguments", "f", bound, keys)
    fast: dict[str, AttributeValue] = {}
    templates = arguments_templates(tuple(names))
    if templates is None or not capture_arguments_into(
        fast, capture_settings, tuple(names), templates, args, keys
    ):
        assert fast == {}  # nothing half-stored before falling back
        capture_into(fast, capture_settings, "arguments", "f", bound, keys)
    assert fast == general


@settings(max_examples=300, deadline=None)
@given(value=scalars)
def test_scalar_json_is_the_encoders(value: object) -> None:
    """Each scalar's fast JSON is the encoder's text for it, and both refuse the same values."""
    try:
        expected: str | None = "".join(_encode(value, 0))
    except ValueError:
        expected = None
    try:
        fast: str | None = _SCALAR_JSON[type(value)](value)
    except ValueError:
        fast = None
    assert fast == expected


def test_common_positional_call_takes_the_fast_path() -> None:
    """A call of a str and an int with ordinary names is rendered by the fast path."""
    attrs: dict[str, AttributeValue] = {}
    templates = arguments_templates(("query", "limit"))
    assert templates is not None
    assert capture_arguments_into(
        attrs, make_settings(), ("query", "limit"), templates, ("refund", 5), ("k",)
    )
    assert attrs == {"k": '{"query":"refund","limit":5}'}
    assert arguments_templates(("user", "password")) is None  # a name with a hint word: general path


@pytest.mark.parametrize(
    "text",
    [
        "sent Authorization: Bearer abc123def and password=hunter2",
        "PASSWORD=hunter2",  # upper case: the scan is of the lower-cased text
        "\x08asic aHVudGVyOmh1bnRlcjI=",  # a hint word only once JSON writes \x08 as \b
    ],
)
def test_decorated_positional_call_is_scrubbed_like_the_bound_dict(
    captured: CapturedSpans, text: str
) -> None:
    """Through @tool, secrets in positional str arguments are scrubbed exactly as capture_into() does."""

    @tool
    def note(text: str, count: int, ratio: float, flag: bool, extra: None) -> str:
        return "ok"

    args = (text, 3, 0.5, True, None)
    note(*args)
    expected: dict[str, AttributeValue] = {}
    keys = (attr.GEN_AI_TOOL_CALL_ARGUMENTS, attr.INPUT_VALUE)
    bound = dict(zip(("text", "count", "ratio", "flag", "extra"), args, strict=True))
    capture_into(expected, make_settings(), "arguments", "note", bound, keys)
    attributes = captured.one("execute_tool note").attributes or {}
    assert attr.AGENTTRAIL_SCRUBBED in attributes
    for key, value in expected.items():
        assert attributes[key] == value, key
