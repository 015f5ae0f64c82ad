"""`choose_provider`: what ``%provider`` records is checked as `create_driver` would check it, without
making the driver or importing it (issue 29: the first magic of a session; the import side is pinned
in a fresh process by tests/notebook/test_first_magic.py)."""

from __future__ import annotations

import pytest

from ipyagent.core import ConfigurationError
from ipyagent.drivers import BUILTIN, choose_provider, create_driver

KEYS = {spec.api_key_env: f"key-{name}-0123456789" for name, spec in BUILTIN.items() if spec.api_key_env}
LOCAL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every built-in key set, no base URL variable but Azure's endpoint (it has no default one)."""
    for spec in BUILTIN.values():
        if spec.base_url_env:
            monkeypatch.delenv(spec.base_url_env, raising=False)
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com/")


CASES = [(name, options) for name in sorted(BUILTIN)
         for options in ({}, {"base_url": LOCAL}, {"base_url": LOCAL, "api_key_env": "OPENAI_API_KEY"})]


@pytest.mark.parametrize(("name", "options"), CASES, ids=[f"{n}-{len(o)}" for n, o in CASES])
def test_a_choice_is_the_driver_that_will_be_made(name: str, options: dict[str, str]) -> None:
    """Same id, API root, key variable and pricing as the driver `create_driver` makes from it."""
    choice = choose_provider(f"{name}:m", **options)
    driver = create_driver(f"{name}:m", **options)
    assert (choice.id, choice.base_url, choice.key_env, choice.price_known) == (
        driver.id, driver.base_url, driver.key_env, driver.price_known)


def test_a_built_in_provider_knows_its_driver_s_default_root() -> None:
    """The spec's `default_base_url` is its driver class's: the registry says it without importing it."""
    for spec in BUILTIN.values():
        if spec.base_url is None:
            assert spec.default_base_url == spec.driver_class().default_base_url, spec.name


def test_the_fallback_variable_is_the_one_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-0123456789")
    assert choose_provider("gemini:m").key_env == "GOOGLE_API_KEY" == create_driver("gemini:m").key_env


REFUSED = [
    ("nope:m", {}, "unknown provider 'nope'"),
    ("openai", {}, "expected PROVIDER:MODEL"),
    ("openai:m", {"base_url": "localhost:8000/v1"}, "--base-url must start with http:// or https://"),
    # what the HTTP client cannot parse is refused here, not by a traceback at the first request
    ("openai:m", {"base_url": "http://[::1"}, r"--base-url 'http://\[::1' is not a valid URL \(Invalid IPv6"),
    ("openai:m", {"base_url": "http://h:abc/v1"}, r"is not a valid URL \(Port could not be cast"),
    ("openai:m", {"base_url": "http://h:99999/v1"}, r"is not a valid URL \(Port out of range"),
    ("openai:m", {"base_url": "http://[zz]/v1"}, r"is not a valid URL .*e\.g\. http://localhost:8000/v1"),
    ("openai:m", {"base_url": "http:///v1"}, "--base-url 'http:///v1' names no host"),
    ("openai:m", {"base_url": "http://h/v\t1"}, "holds a control character"),
    ("anthropic:m", {"api_key_env": "UNSET_VARIABLE_0"}, "UNSET_VARIABLE_0 is not set"),
]


@pytest.mark.parametrize(("provider_id", "options", "message"), REFUSED)
def test_a_choice_refuses_what_a_driver_refuses(provider_id: str, options: dict[str, str], message: str) -> None:
    for make in (choose_provider, create_driver):
        with pytest.raises(ConfigurationError, match=message):
            make(provider_id, **options)


def test_a_missing_key_or_azure_endpoint_is_refused_with_the_driver_s_words(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY is not set: set it in the environment"):
        choose_provider("openai:m")
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    for make in (choose_provider, create_driver):
        with pytest.raises(ConfigurationError, match=r"AZURE_OPENAI_ENDPOINT is not set: .*NAME\.openai\.azure\.com"):
            make("azure-openai:dep")


def test_price_as_needs_a_provider_and_a_model() -> None:
    with pytest.raises(ConfigurationError, match="price_as takes PROVIDER:MODEL"):
        choose_provider("openai:m", base_url=LOCAL, price_as="gpt-4o")
    assert not choose_provider("openai:m", base_url=LOCAL, price_as="openai:gpt-4o").price_known  # another host


def test_price_as_a_model_without_a_price_is_refused() -> None:
    """Else every turn reads "price unknown" with nothing said when it was set."""
    with pytest.raises(ConfigurationError, match=r"--price-as 'nosuch:model': genai-prices has no price for it"):
        choose_provider("openai:m", base_url=LOCAL, price_as="nosuch:model")
    with pytest.raises(ConfigurationError, match="has no price for it"):
        choose_provider("openai:m", base_url=LOCAL, price_as="openai:no-such-model-0")
    assert choose_provider("openai:m", base_url=LOCAL, price_as="openai:gpt-4o").id == "openai:m"


def test_a_replay_is_made_from_its_cassette_not_chosen() -> None:
    with pytest.raises(ConfigurationError, match="create_driver reads the cassette"):
        choose_provider("replay:somewhere.jsonl")


def test_the_choice_keeps_no_key() -> None:
    choice = choose_provider("openai:m")
    assert KEYS["OPENAI_API_KEY"] not in repr(choice) and choice.api_key() == KEYS["OPENAI_API_KEY"]


def test_an_ipv6_base_url_with_its_port_is_taken() -> None:
    assert choose_provider("openai:m", base_url="http://[::1]:8000/v1").base_url == "http://[::1]:8000/v1"
