"""The one redactor (`ipyagent.core.redact`): which secrets it knows and which forms it finds."""

from __future__ import annotations

import base64
import json
import sys
from urllib.parse import quote, quote_plus

import pytest

from ipyagent.core import ProviderError
from ipyagent.core.redact import (
    MASK,
    StreamRedactor,
    add_secret,
    add_url,
    redact,
    redact_data,
    redact_head,
    secret_forms,
    secrets,
)
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

KEY = 'Kq7+z/=w"x\\y-registered-0042'


@pytest.fixture(autouse=True)
def _key():
    add_secret(KEY)


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        quote(KEY, safe=""),
        quote_plus(KEY),
        json.dumps(KEY)[1:-1],
        json.dumps(json.dumps(KEY)[1:-1])[1:-1],
        repr(KEY)[1:-1],
    ],
)
def test_each_textual_form_is_masked(form):
    assert redact(f"before {form} after") == f"before {MASK} after"


@pytest.mark.parametrize("prefix", ["", "B", "Be", "Bearer ", "x:"])
def test_base64_is_masked_at_any_offset_and_in_both_alphabets(prefix):
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode((prefix + KEY + " tail").encode()).decode()
        out = redact(encoded)
        assert MASK in out and encoded not in out
        # What is left cannot be decoded back to the key.
        assert KEY not in encoded.replace(out, "")


def test_a_key_given_to_a_driver_is_a_secret_whatever_its_variable(monkeypatch):
    monkeypatch.setenv("CORP_LLM", "plain-looking-value-123")  # a name that does not look secret
    assert redact("plain-looking-value-123") == "plain-looking-value-123"
    OpenAIChatPromptDriver("m", api_key=" plain-looking-value-123\n", base_url="http://127.0.0.1:9/v1")
    assert redact("x plain-looking-value-123") == f"x {MASK}"


def test_secret_named_environment_values_are_masked_and_others_kept(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "env-secret-value-77")
    monkeypatch.setenv("SOME_SERVICE_URL", "http://example.org/not-a-secret")
    assert redact("env-secret-value-77 http://example.org/not-a-secret") == f"{MASK} http://example.org/not-a-secret"


def test_short_values_are_not_secrets():
    add_secret("ollama")  # a placeholder key: masking it would mask every mention of the provider
    assert redact("ollama:llama3.2") == "ollama:llama3.2"
    assert all(len(form) >= 8 for form in secret_forms("abcdefgh"))


def test_url_credentials_are_masked_without_registration():
    text = "see http://bob:p4ss@h:1/v1?key=abc&x=1&access_token=t0k&monkey=2 and https://h/x?sig=s1#f"
    assert redact(text) == (f"see http://{MASK}@h:1/v1?key={MASK}&x=1&access_token={MASK}&monkey=2 "
                            f"and https://h/x?sig={MASK}#f")


def test_a_masked_query_value_ends_where_its_url_does():
    assert redact("timed out (http://h/v1?key=abc) twice") == f"timed out (http://h/v1?key={MASK}) twice"


def test_a_registered_url_makes_its_credentials_secrets_everywhere():
    add_url("http://carol:Hunter2-Secret@h/v1?token=query-token-999")
    basic = base64.b64encode(b"carol:Hunter2-Secret").decode()
    out = redact(
        f"Hunter2-Secret / Basic {basic} / query-token-999 / {base64.b64encode(('Basic ' + basic).encode()).decode()}"
    )
    assert "Hunter2" not in out and basic not in out and "query-token" not in out and out.count(MASK) == 4


def test_key_shaped_strings_are_masked_but_lookalikes_kept():
    assert redact("sk-proj-abcdefghijklmnopqrstuvwx and sk-learn-pipeline-v2") == f"{MASK} and sk-learn-pipeline-v2"


def test_structured_data_keeps_its_shape_and_masks_credential_fields():
    data = {
        "key": "user-42",
        "Authorization": "Bearer x",
        "nested": [{"api_key": "k", "text": KEY}],
        "n": 3,
        "t": (1, KEY),
    }
    assert redact_data(data) == {"key": "user-42", "Authorization": MASK, "nested": [{"api_key": MASK, "text": MASK}],
                                 "n": 3, "t": [1, MASK]}


def test_a_secret_split_across_stream_pieces_is_masked():
    text = f"the key is {KEY} ok\n" * 2
    redactor = StreamRedactor()
    out = "".join(redactor.feed(text[i:i + 3]) for i in range(0, len(text), 3)) + redactor.flush()
    assert out == f"the key is {MASK} ok\n" * 2


def test_a_stream_without_whitespace_is_still_released():
    redactor = StreamRedactor(max_word=100)
    out = redactor.feed("x" * 1000)
    assert 900 <= len(out) < 1000 and len(out + redactor.flush()) == 1000


def test_error_messages_are_redacted_whenever_set():
    error = ProviderError("server", f"echo {KEY}")
    error.message = f"again {KEY}"
    assert (
        KEY not in str(error)
        and KEY not in repr(error)
        and KEY not in json.dumps(error.to_dict())
        and KEY not in error.args[0]
    )


def test_redact_data_reads_the_secrets_once_per_call(monkeypatch) -> None:
    """Redacting a batch (an evaluation's runs) must not read the environment once per string."""
    module = sys.modules["ipyagent.core.redact"]  # `ipyagent.core.redact` names the function

    monkeypatch.setenv("BATCH_SERVICE_TOKEN", "tok-batch-secret-987654")
    calls = []
    real = module.secrets
    monkeypatch.setattr(module, "secrets", lambda: calls.append(1) or real())
    data = [{"text": f"row {n}: tok-batch-secret-987654", "nested": ["tok-batch-secret-987654"]} for n in range(50)]
    out = module.redact_data(data)
    assert len(calls) == 1
    assert all(d["text"] == f"row {n}: {module.MASK}" and d["nested"] == [module.MASK] for n, d in enumerate(out))


def test_a_changed_environment_is_seen_at_the_next_call(monkeypatch) -> None:
    """The environment's secrets are kept between calls, but a variable set, changed or removed counts at once."""
    monkeypatch.setenv("LATER_SERVICE_TOKEN", "first-token-value-111")
    assert redact("first-token-value-111") == MASK
    monkeypatch.setenv("LATER_SERVICE_TOKEN", "second-token-value-222")
    assert redact("first-token-value-111 second-token-value-222") == f"first-token-value-111 {MASK}"
    monkeypatch.delenv("LATER_SERVICE_TOKEN")
    assert redact("second-token-value-222") == "second-token-value-222"


REDACT_JSON_CASES = [
    {"plain": "nothing to hide", "n": 3, "none": None, "list": [1.5, True, "x = 1"], "ü": "naïve"},
    {"text": f"the key {KEY} here"},
    {"double": json.dumps(json.dumps(KEY)[1:-1])[1:-1], "repr": repr(KEY)},  # escaped forms, escaped once more by JSON
    {"url": "http://bob:p4ss@h/v1?token=t0k&x=1"},
    {"words": "sk-proj-abcdefghijklmnopqrstuvwx\nsk-learn"},
    {"AUTHORIZATION": "Bearer x", "nested": [{"Api_Key": "k"}], "t": (1, 2)},
    {"authorization": ""},  # an empty credential field is kept
    {"x": "ü", "Client_Secret": "s"},  # beyond ASCII the names are found by the case-insensitive expression
    {"api_\u212aey": "k"},  # KELVIN SIGN: lower() gives "api_key", a credential field
    {"PASSWORD": "p", "eyJ": "not a token"},
    ["control\x01chars", "quote \" and backslash \\"],
    f"{KEY}",
]


@pytest.mark.parametrize("value", REDACT_JSON_CASES)
def test_redact_json_is_the_dump_of_redact_data(value) -> None:
    from ipyagent.core.redact import redact_json

    assert redact_json(value) == json.dumps(redact_data(value), ensure_ascii=False, default=str)


def test_redact_json_all_is_redact_json_of_each_scanned_together() -> None:
    """A stored run's JSON fields are scanned once, together: a secret in one of them redacts that one
    as `redact_json` would, the others stay as they are, and an empty column stays empty."""
    from ipyagent.core.redact import redact_json, redact_json_all

    clean = [{"n": 1}, None, "plain"]
    assert redact_json_all(clean) == [json.dumps({"n": 1}), None, '"plain"']
    for value in REDACT_JSON_CASES:
        mixed = [{"n": 1}, value, None, ["x"]]
        assert redact_json_all(mixed) == [redact_json(v) if v is not None else None for v in mixed]
    assert redact_json_all([]) == []


# -- issue 26: key formats, the environment, and context sent to a model ----------------------

from ipyagent.core.redact import mask_named, redact_context, secret_name  # noqa: E402

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize("key", [
    "sk-ant-api03-" + "a" * 40, "sk-proj-" + "b" * 30, "AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE",
    "ghp_" + "c" * 36, "github_pat_" + "d" * 40, "xoxb-1234567890-abcdefghij", "xoxp-1234567890-abc",
    "AIza" + "e" * 35, "glpat-" + "f" * 20, "hf_" + "g" * 34, "sk_live_" + "h" * 24, JWT,
])
def test_each_well_known_key_format_is_masked(key):
    assert redact(f"key {key} here") == f"key {MASK} here"


@pytest.mark.parametrize("text", ["AKIA is a prefix", "ghp_short", "eyJhbGciOiJIUzI1NiJ9 alone", "xox-nope",
                                  "github_pat_x", "glpat-short", "hf_hub_download"])
def test_lookalikes_of_key_formats_are_kept(text):
    assert redact(text) == text


def test_a_bearer_token_is_masked_and_the_word_bearer_kept():
    assert redact("Authorization: Bearer abcdefghij0123456789") == f"Authorization: Bearer {MASK}"
    assert redact("bearer  q1w2e3r4t5y6u7i8o9p0") == f"bearer  {MASK}"
    assert redact("the Bearer authentication scheme") == "the Bearer authentication scheme"  # no digit: a word


def test_environment_secrets_by_name_part_and_url_password(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN_RO", "ro-token-value-1234")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:Db-Pass-98765@db:5432/x")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long")  # a part TOKENIZERS, not TOKEN
    assert redact("ro-token-value-1234 / Db-Pass-98765 / false-but-long") == f"{MASK} / {MASK} / false-but-long"


@pytest.mark.parametrize("name, secret", [
    ("OPENAI_API_KEY", True), ("api_key", True), ("apiKey", True), ("accessToken", True), ("x-api-key", True),
    ("Authorization", True), ("db_password", True), ("client_secret", True), ("github_token", True),
    ("passphrase", True), ("credentials", True), ("key", False), ("max_tokens", False), ("tokens", False),
    ("tokenizer", False), ("token_type", False), ("PWD", False), ("monkey", False), ("secretary_name", False),
])
def test_which_names_look_secret(name, secret):
    assert secret_name(name) is secret


@pytest.mark.parametrize("text, shown, masked", [
    ("{'password': 'hunter2', 'n': 3}", f"{{'password': '{MASK}', 'n': 3}}", 1),
    ('api_key = "plain-value"', f'api_key = "{MASK}"', 1),
    ("Config(api_key='zzz', timeout=3)", f"Config(api_key='{MASK}', timeout=3)", 1),
    ("PASSWORD=hunter2 user=bob", f"PASSWORD={MASK} user=bob", 1),
    ("password: hunter2\nname: x", f"password: {MASK}\nname: x", 1),
    ("token = tokenizer(text)", "token = tokenizer(text)", 0),  # code: an expression, not a secret
    ("if token==x: pass", "if token==x: pass", 0),
    ("max_tokens = 5, tokens: 7", "max_tokens = 5, tokens: 7", 0),
    ('  "token": get_token(),', '  "token": get_token(),', 0),
    ("db at postgres://app:pw-1@db/x", f"db at postgres://{MASK}@db/x", 1),
    ("", "", 0),
])
def test_context_masks_values_written_under_secret_names(text, shown, masked):
    assert redact_context(text) == (shown, masked)


def test_mask_named_masks_secret_entries_at_any_depth_and_keeps_the_rest():
    value = {"api_key": "k", "nested": [{"token": "t", "max_tokens": 5}, ("x", {"password": "p"})], "password": "",
             "secret": None, "retries": 3}
    masked, count = mask_named(value)
    assert count == 3 and masked == {"api_key": MASK, "password": "", "secret": None, "retries": 3,
                                     "nested": [{"token": MASK, "max_tokens": 5}, ("x", {"password": MASK})]}
    assert value["api_key"] == "k"  # a copy: the user's value is untouched


def test_mask_named_leaves_no_reference_cycle_to_the_garbage_collector():
    """An evaluation masks every row's context: its walk is no nested function calling itself
    (a cycle a call, left to the cyclic collector)."""
    import gc

    value = {"api_key": "k", "rows": [{"token": "t"}, ("x", {"n": 1})]}
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert mask_named(value)[1] == 2
        gc.collect()
        left = [o for o in gc.garbage if callable(o) and getattr(o, "__module__", None) == "ipyagent.core.redact"]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


def test_mask_named_leaves_what_is_too_big_to_walk_to_the_text_rules():
    from ipyagent.core.redact import MASK_NODES

    big = [{"token": "t"}] * (MASK_NODES + 1)
    assert mask_named(big) == (big, 0)
    assert mask_named("text") == ("text", 0) and mask_named(5) == (5, 0)


def test_a_head_is_cut_after_redacting_so_a_secret_across_the_cut_is_masked_whole() -> None:
    text = "x" * 10 + KEY + " and more"
    head = redact_head(text, 15)
    assert head == ("x" * 10 + MASK)[:15] and KEY[:5] not in head
    assert redact_head("short") == "short" and redact_head("y" * 300) == "y" * 200  # 200 characters by default


def test_a_url_s_user_name_alone_is_its_credential_and_no_url_registers_nothing():
    add_url("https://ghp-token-user-0042@h/repo.git")
    assert redact("cloned ghp-token-user-0042 fine") == f"cloned {MASK} fine"
    before = secrets()
    add_url(None)
    add_url("")
    add_url("http://[::1")  # not a URL: nothing to read
    assert secrets() == before


# -- mutation gaps (issue 27): each form exactly, the forms a caller gives, the stream's cut --------

def test_secret_forms_are_exactly_the_seven_escapes_and_the_base64_cores_of_each_alignment() -> None:
    """A secret whose every escape differs: raw, URL-quoted (``/`` too) and plus-quoted, JSON-escaped
    (ASCII), JSON-escaped twice, JSON-escaped keeping non-ASCII, repr-escaped; then the base64 of its
    bytes at each of the three alignments, standard and URL-safe, each cut to the characters only the
    secret fixes. The raw form is 8 characters: as short as a form may be."""
    secret = 'é"\\ /?>~'
    assert secret_forms(secret) == {
        secret, "%C3%A9%22%5C%20%2F%3F%3E~", "%C3%A9%22%5C+%2F%3F%3E~", "\\u00e9\\\"\\\\ /?>~",
        "\\\\u00e9\\\\\\\"\\\\\\\\ /?>~", 'é\\"\\\\ /?>~', 'é"\\\\ /?>~',
        "w6kiXCAvPz5+", "w6kiXCAvPz5-", "DqSJcIC8/Pn", "DqSJcIC8_Pn", "OpIlwgLz8+f", "OpIlwgLz8-f",
    }
    # Six bytes: their base64 core at the first alignment is 8 characters, kept; the others are 7.
    assert secret_forms("123456") == {"MTIzNDU2"}


def test_the_forms_a_caller_gives_are_the_ones_looked_for(monkeypatch) -> None:
    """`redact_json`, `redact_json_all` and `redact_context` take the caller's forms (a batch computes
    them once), not the ones in play: a value only the given forms name is masked, and a mask already
    in the text is not counted again."""
    from ipyagent.core.redact import redact_json, redact_json_all

    forms = ("only-given-form-31",)
    assert redact_json({"a": "x only-given-form-31"}, forms) == json.dumps({"a": f"x {MASK}"})
    assert redact_json_all([{"a": "only-given-form-31"}, None], forms) == [json.dumps({"a": MASK}), None]
    assert redact_context(f"{MASK} and only-given-form-31", forms) == (f"{MASK} and {MASK}", 1)


def test_a_url_password_holding_a_colon_is_read_from_the_first_colon(monkeypatch) -> None:
    from ipyagent.core.redact import env_secrets

    monkeypatch.setenv("SOME_DB_URL", "postgres://admin:pa:ss-word-9@db/x")
    assert "pa:ss-word-9" in env_secrets()


@pytest.mark.parametrize("text", [
    "see https://admin:hunter2-long-pw@example.org/x",  # URL credentials, nothing else
    "see https://example.org/x?api_key=abcdefgh12345678",  # a secret-named query value
    "header Bearer abcdefghijklmnopqrstuvwxyz012345",  # a bearer token, capitalised
    "HEADER BEARER ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",  # upper case
], ids=["url-credentials", "query-secret", "bearer", "bearer-upper"])  # no "/" in a node id mutmut passes to pytest
def test_redact_json_masks_what_only_one_cheap_pre_check_sees(text: str) -> None:
    """`redact_json` skips redacting when its cheap checks see nothing: each check is the only one that
    sees its kind of text, so a check left out would leak it."""
    from ipyagent.core.redact import redact_json

    masked = json.dumps({"t": redact_data(text)}, ensure_ascii=False)
    assert redact_json({"t": text}) == masked != json.dumps({"t": text})


def test_a_stream_is_released_up_to_its_last_space_newline_or_tab() -> None:
    for space in (" ", "\n", "\t"):
        stream = StreamRedactor()
        assert stream.feed(f"one{space}two{space}thr") == f"one{space}two{space}" and stream.flush() == "thr"
        assert stream.flush() == ""  # the held-back rest is given once


def test_a_word_longer_than_max_word_is_released_but_its_last_half() -> None:
    stream = StreamRedactor(max_word=10)
    assert stream.feed("x" * 10) == ""  # as long as a form worth waiting for: held
    assert stream.feed("x") == "x" * 6 and stream.flush() == "x" * 5  # 11 > 10: all but the last 5 shown
    stream = StreamRedactor(max_word=10)
    assert stream.feed("ab " + "y" * 9) == "ab " and stream.flush() == "y" * 9  # the word, not the text, counts
    default = StreamRedactor()
    assert default.feed("z" * 4096) == "" and default.feed("z") == "z" * 2049


def test_mask_named_walks_exactly_mask_nodes_containers_and_items() -> None:
    from ipyagent.core.redact import MASK_NODES

    fits = [{"token": "t"}] + [0] * (MASK_NODES - 2)  # the list, the dict and the zeros: MASK_NODES nodes
    assert mask_named(fits) == ([{"token": MASK}] + [0] * (MASK_NODES - 2), 1)
    over = fits + [0]
    assert mask_named(over) == (over, 0)


def test_a_secret_of_exactly_the_shortest_length_is_kept_from_a_call_the_environment_and_a_url(monkeypatch) -> None:
    from ipyagent.core.redact import MIN_SECRET_LENGTH, env_secrets

    add_secret("8-chars!")
    monkeypatch.setenv("SHORT_API_KEY", "8-env-ch")
    assert MIN_SECRET_LENGTH == 8 and "8-chars!" in secrets() and "8-env-ch" in env_secrets()
    add_url("https://:no-user-pw-1@h/x")  # no user name: HTTP Basic sends ":password"
    add_url("https://bob:bobs-pw-22@h/x")
    assert {":no-user-pw-1", "bob:bobs-pw-22", "bobs-pw-22"} <= secrets()


def test_an_upper_case_bearer_token_is_masked_by_redact() -> None:
    assert redact("HEADER: BEARER ABCDEFGHIJKLMNOPQRSTUVWXYZ0123") != "HEADER: BEARER ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
