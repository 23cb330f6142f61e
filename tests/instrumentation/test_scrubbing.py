"""Secret scrubbing: a table of texts that must and must not be scrubbed, structured values
(dataclasses, pydantic models), exception events, the agenttrail.scrubbed record, extra patterns.
"""

import dataclasses
import json
import os
from typing import Any

import pytest
from opentelemetry.util.types import AttributeValue

from agenttrail.instrumentation import agent, configure, tool
from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._capture import REDACTED, capture_into, make_settings
from agenttrail.instrumentation._setup import SCRUB_PATTERNS_ENV
from agenttrail.instrumentation.testing import CapturedSpans


def render(value: object, **options: Any) -> tuple[str, dict[str, AttributeValue]]:
    """The text capture_into() stores for ``value``, and every attribute it set."""
    attrs: dict[str, AttributeValue] = {}
    capture_into(attrs, make_settings(**options), "arguments", "search", value, ("k",))
    return str(attrs["k"]), attrs


# (free text as a tool might be handed it, the secret in it that must not be stored)
MUST_SCRUB = [
    ("password=hunter2", "hunter2"),
    ("login failed with password: hunter2 for ann", "hunter2"),
    ("PASSWORD = correct-horse", "correct-horse"),
    ("secret: s3cr3t-value", "s3cr3t-value"),
    ('client_secret="xyz 789"', "xyz 789"),
    ("api_key='AbC123dEf'", "AbC123dEf"),
    ("GET /cb?code=1&access_token=ya29a0Af&x=1", "ya29a0Af"),
    ('{"password": "hunter2"} as a JSON document in a string', "hunter2"),
    ("{'api_key': 'k-123456'} printed from a dict", "k-123456"),
    ("https://ann:hunter2@db.example.com/orders", "hunter2"),
    ("postgres://admin:s3cret@localhost:5432/shop", "s3cret"),
    ("Authorization: Basic YW5uOmh1bnRlcjI=", "YW5uOmh1bnRlcjI="),
    ("sent header Basic YW5uOmh1bnRlcjI= upstream", "YW5uOmh1bnRlcjI="),
    ("curl -H 'Authorization: Bearer abc123' https://api", "abc123"),
    ("Authorization: Bearer short", "short"),
    ("auth with Bearer a1b2c3 failed", "a1b2c3"),
    ("token: tok_9f8e7d", "tok_9f8e7d"),
    ("Cookie: sessionid=8f3a9c", "8f3a9c"),
    ("key sk-proj-abcdefghijklmnopqrstuv in text", "sk-proj-abcdefghijklmnopqrstuv"),
]

# Ordinary text that mentions secret-ish words: stored exactly as it was.
MUST_KEEP = [
    "the token count was 812",
    "token count: 812",
    "max_tokens: 512, input_tokens=20, token_count=5",
    "passwordless sign-in is enabled",
    "passwordless: true",
    "the secretary: Ann Smith",
    "secretary=Ann",
    "author: Jane Doe",
    "the bearer of bad news",
    "Bearer bonds are paper",
    "Basic information about refunds",
    "Basic instructions: restart",
    "see https://example.com/path?q=1&page=2",
    "write to ann@example.com",
    "https://ann@example.com/profile",
    "the key point: refunds take 5 days",
    "please reset my password",
    "password reset: sent",
    "Authentication succeeded",
    "keyboard: qwerty",
]


@pytest.mark.parametrize(("text", "secret"), MUST_SCRUB)
def test_secrets_in_free_text_are_scrubbed(text: str, secret: str) -> None:
    """A secret in free text is removed, the rest of the text stays, and the JSON stays valid."""
    rendered, attrs = render({"note": text})
    assert secret not in rendered
    note = json.loads(rendered)["note"]
    assert REDACTED in note
    assert attr.AGENTTRAIL_SCRUBBED in attrs


@pytest.mark.parametrize(("text", "secret"), MUST_SCRUB)
def test_secrets_in_repr_text_are_scrubbed(text: str, secret: str) -> None:
    """The same secrets inside an object's repr() (stored as a JSON string) are removed too."""

    class Note:
        def __repr__(self) -> str:
            return f"Note({text})"

    rendered, _ = render([Note()])
    assert secret not in rendered
    json.loads(rendered)


@pytest.mark.parametrize("text", MUST_KEEP)
def test_ordinary_text_is_kept(text: str) -> None:
    """Everyday words next to secret words survive unchanged and the span does not claim scrubbing."""
    rendered, attrs = render({"note": text})
    assert json.loads(rendered) == {"note": text}
    assert attr.AGENTTRAIL_SCRUBBED not in attrs


@pytest.mark.parametrize("key", ["secretary", "passwordless", "author", "token_count", "authentication"])
def test_ordinary_keys_are_kept(key: str) -> None:
    """Dict keys that are ordinary words containing a secret word keep their values."""
    rendered, attrs = render({key: "visible"})
    assert json.loads(rendered) == {key: "visible"}
    assert attr.AGENTTRAIL_SCRUBBED not in attrs


def test_url_keeps_user_and_host() -> None:
    """Only the password of URL userinfo goes; scheme, user, host and path stay readable."""
    rendered, _ = render("postgres://admin:s3cret@localhost:5432/shop")
    assert json.loads(rendered) == f"postgres://admin:{REDACTED}@localhost:5432/shop"


@dataclasses.dataclass
class Login:
    user: str
    password: str
    note: str = ""


@dataclasses.dataclass
class Hidden:
    name: str
    internal: str = dataclasses.field(default="x", repr=False)


def test_dataclass_arguments_are_captured_as_objects_with_secret_fields_scrubbed() -> None:
    """A dataclass argument becomes a JSON object (repr=False fields left out) and secret fields go."""
    rendered, attrs = render({"login": Login("ann", "hunter2"), "items": [Hidden("a", "zz-internal")]})
    assert json.loads(rendered) == {
        "login": {"user": "ann", "password": REDACTED, "note": ""},
        "items": [{"name": "a"}],
    }
    assert "zz-internal" not in rendered
    assert attrs[attr.AGENTTRAIL_SCRUBBED] == ("k: $.login.password",)


def test_pydantic_model_arguments_have_secret_fields_scrubbed() -> None:
    """A pydantic model (found by duck typing) is captured field by field, secret fields scrubbed."""
    pydantic = pytest.importorskip("pydantic")

    class Credentials(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        account: str
        api_key: str

    class Request(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        query: str
        creds: Credentials

    value = Request(query="refund", creds=Credentials(account="acme", api_key="k-abcdef123456"))
    rendered, _ = render(value)
    assert json.loads(rendered) == {"query": "refund", "creds": {"account": "acme", "api_key": REDACTED}}


def test_self_referencing_dataclass_does_not_break_capture() -> None:
    """A dataclass that contains itself renders with a [circular] marker, and secrets still go."""

    @dataclasses.dataclass
    class Node:
        password: str
        child: Any = None

    node = Node("hunter2")
    node.child = node
    rendered, _ = render(node)
    assert "hunter2" not in rendered
    assert json.loads(rendered)["password"] == REDACTED


def test_dataclass_with_an_unreadable_field_is_rendered_and_scrubbed() -> None:
    """A dataclass whose field cannot be read renders as a placeholder; its siblings are still scrubbed."""

    @dataclasses.dataclass
    class Lazy:
        ready: bool
        cache: str = dataclasses.field(init=False)

    decoded = json.loads(render({"lazy": Lazy(True), "password": "hunter2"})[0])
    assert decoded["password"] == REDACTED
    assert decoded["lazy"].startswith("<unrepresentable ")
    assert decoded["lazy"].endswith("Lazy>")


def test_scrubbed_attribute_names_what_was_scrubbed() -> None:
    """agenttrail.scrubbed lists each attribute with the path or kind of secret that was removed."""
    _, attrs = render({"auth": {"password": "x"}, "note": "Bearer a1b2c3d4 and api_key=zz9"})
    assert set(attrs[attr.AGENTTRAIL_SCRUBBED]) == {  # type: ignore[arg-type]
        "k: $.auth",
        'k: key "api_key" in text',
        "k: bearer token",
    }


def test_scrubbing_happens_before_truncation_in_free_text() -> None:
    """A password=... near the cut is removed whole, not half-kept by truncation."""
    rendered, attrs = render({"note": "x" * 10 + " password=" + "h" * 30}, max_value_length=25)
    assert "hhhh" not in rendered
    assert attr.AGENTTRAIL_TRUNCATED in attrs


class CustomerError(Exception):
    """An exception whose message carries a secret."""


def connect(dsn: str) -> None:
    raise CustomerError(f"cannot connect to {dsn}")


def test_exception_message_stacktrace_and_status_are_scrubbed(captured: CapturedSpans) -> None:
    """A secret in an exception message or in a source line of its stack trace is not stored."""

    @tool
    def lookup(order: int) -> None:
        connect("postgres://admin:s3cret@db.internal/shop")  # the literal shows in the stack trace

    with pytest.raises(CustomerError):
        lookup(1)
    span = captured.one("execute_tool lookup")
    event = span.events[0]
    event_attrs = dict(event.attributes or {})
    assert event.name == "exception"
    assert "s3cret" not in str(event_attrs)
    assert (
        event_attrs["exception.message"] == f"cannot connect to postgres://admin:{REDACTED}@db.internal/shop"
    )
    assert f"admin:{REDACTED}@db.internal" in str(event_attrs["exception.stacktrace"])
    assert "connect(" in str(event_attrs["exception.stacktrace"])  # the trace itself is kept
    assert event_attrs["exception.type"] == f"{__name__}.CustomerError"
    assert span.status.description == event_attrs["exception.message"]
    scrubbed = set((span.attributes or {})[attr.AGENTTRAIL_SCRUBBED])  # type: ignore[arg-type]
    assert {"exception.message: url password", "exception.stacktrace: url password"} <= scrubbed


def test_exception_without_secrets_is_recorded_unchanged(captured: CapturedSpans) -> None:
    """An ordinary exception keeps its message and stack trace, and the span claims no scrubbing."""

    @agent
    def planner() -> None:
        raise ValueError("token count 812 exceeds the limit")

    with pytest.raises(ValueError, match="token count"):
        planner()
    span = captured.one("invoke_agent planner")
    assert (span.events[0].attributes or {})["exception.message"] == "token count 812 exceeds the limit"
    assert span.status.description == "token count 812 exceeds the limit"
    assert attr.AGENTTRAIL_SCRUBBED not in (span.attributes or {})


def test_tool_arguments_on_spans_name_both_attributes(captured: CapturedSpans) -> None:
    """On a tool span, the record names each attribute that held the scrubbed value."""

    @tool
    def login(user: str, dsn: str) -> str:
        return "ok"

    login("ann", "https://ann:pw1@host")
    attributes = captured.one("execute_tool login").attributes or {}
    assert "pw1" not in str(dict(attributes))
    assert attributes[attr.AGENTTRAIL_SCRUBBED] == (
        f"{attr.GEN_AI_TOOL_CALL_ARGUMENTS}: url password",
        f"{attr.INPUT_VALUE}: url password",
    )


def test_extra_patterns_apply_to_keys_and_to_text() -> None:
    """scrub_patterns add secret key names, used for dict keys and for name=value in text."""
    rendered, _ = render(
        {"member_no": 1234, "note": "member_no: 5678", "members": 3}, scrub_patterns=["member_no"]
    )
    assert json.loads(rendered) == {"member_no": REDACTED, "note": f"member_no: {REDACTED}", "members": 3}


def test_extra_patterns_from_the_environment(
    captured: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AGENTTRAIL_SCRUB_PATTERNS (comma-separated or a JSON list) adds patterns when configure() has none."""
    monkeypatch.setenv(SCRUB_PATTERNS_ENV, "^pin$, member_?no")
    configure(tracer_provider=captured.provider)

    @tool
    def account(pin: str, member_no: str, pinned: bool) -> str:
        return "ok"

    account("1234", "m-77", True)
    arguments = json.loads(str((captured.one("execute_tool account").attributes or {})[attr.INPUT_VALUE]))
    assert arguments == {"pin": REDACTED, "member_no": REDACTED, "pinned": True}

    monkeypatch.setenv(SCRUB_PATTERNS_ENV, '["^pin$", "a{1,3}b"]')
    configure(tracer_provider=captured.provider)
    captured.clear()
    account("1234", "m-77", True)
    arguments = json.loads(str((captured.one("execute_tool account").attributes or {})[attr.INPUT_VALUE]))
    assert arguments == {"pin": REDACTED, "member_no": "m-77", "pinned": True}


def test_configure_argument_wins_over_the_environment(
    captured: CapturedSpans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scrub_patterns given to configure() replace the environment's list."""
    monkeypatch.setenv(SCRUB_PATTERNS_ENV, "^pin$")
    configure(tracer_provider=captured.provider, scrub_patterns=["member_no"])

    @tool
    def account(pin: str, member_no: str) -> str:
        return "ok"

    account("1234", "m-77")
    arguments = json.loads(str((captured.one("execute_tool account").attributes or {})[attr.INPUT_VALUE]))
    assert arguments == {"pin": "1234", "member_no": REDACTED}


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        (["ok", "("], r"scrub_patterns\[1\] '\(' is not a valid regular expression: missing \)"),
        (["a|"], r"scrub_patterns\[0\] 'a\|' matches the empty string, so it would scrub every key"),
        ([""], r"scrub_patterns\[0\] '' matches the empty string"),
        (["(?i)pin"], r"scrub_patterns\[0\] '\(\?i\)pin' .*global flag"),
        ([3], r"scrub_patterns\[0\] must be a str \(a regular expression\), got 3"),
    ],
)
def test_bad_patterns_are_refused_with_what_was_wrong(patterns: list[Any], message: str) -> None:
    """configure(scrub_patterns=...) says which pattern is wrong and why; settings stay unchanged."""
    with pytest.raises(ValueError, match=message):
        configure(scrub_patterns=patterns)


def test_bad_pattern_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad AGENTTRAIL_SCRUB_PATTERNS names the variable and the pattern."""
    monkeypatch.setenv(SCRUB_PATTERNS_ENV, "ok,(")
    with pytest.raises(
        ValueError, match=rf"{SCRUB_PATTERNS_ENV}\[1\] '\(' is not a valid regular expression"
    ):
        configure()
    assert os.environ[SCRUB_PATTERNS_ENV] == "ok,("
