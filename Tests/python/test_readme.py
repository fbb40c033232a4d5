"""The snippets of python/README.md and of docs/ run as written, against the private keyring and the loopback
Portal API: only the configuration lines (AUTH_ENVIRONMENT_ID, REDIRECT_URL, API_HOST, EMAIL) are
replaced, and the app's own UI functions (wait_for_redirect, ask_for_totp_code, open_browser)
are supplied."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

import pytest

from conftest import REPO, PortalApi

REDIRECT = "py-readme://portal/redirect"


def snippets() -> Dict[str, str]:
    """The ```python blocks under each '## ' heading of the package README."""
    with open(os.path.join(REPO, "python", "README.md"), encoding="utf-8") as f:
        text = f.read()
    found: Dict[str, str] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
        if blocks:
            found[title] = "\n".join(blocks)
    return found


def configure(code: str, **values: Optional[str]) -> str:
    for name, value in values.items():
        code, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", code, count=1, flags=re.M)
        assert count == 1, f"the snippet has no '{name} = ...' line"
    return code


def run(code: str, capsys: Any, **functions: Any) -> str:
    namespace: Dict[str, Any] = {"__name__": "readme_snippet", **functions}
    exec(compile(code, "python/README.md", "exec"), namespace)
    out: str = capsys.readouterr().out
    return out


def test_the_readme_has_the_three_snippets() -> None:
    assert {"Restore on launch", "Sign in", "Invalidation", "asyncio", "Sign in with asyncio"} <= set(snippets())


def test_restore_on_launch_snippet(pk: Any, env_id: str, api: PortalApi, capsys: Any) -> None:
    code = configure(snippets()["Restore on launch"], AUTH_ENVIRONMENT_ID=env_id, REDIRECT_URL=REDIRECT,
                     API_HOST=api.host)
    assert run(code, capsys) == "signed out: show sign-in\n"
    with pk.PortalAuth(env_id, REDIRECT, api.host) as auth:
        auth.persist_session("readme-user", api.issue("readme-user")).close()
    assert run(code, capsys) == "signed in as readme-user\n"


@pytest.mark.parametrize("totp", [False, True])
def test_sign_in_snippet(pk: Any, env_id: str, api: PortalApi, capsys: Any, totp: bool) -> None:
    email = f"readme-{os.getpid()}-{int(totp)}@example.com"
    user = api.admin("end-users", {"email": email, "totpRequired": totp})
    seen_links: List[Optional[str]] = []

    def wait_for_redirect() -> str:
        links = [e for e in api.admin("magic-links")["links"] if e["email"] == email]
        link: str = links[-1]["link"]
        return link

    def ask_for_totp_code(link: Optional[str]) -> str:
        seen_links.append(link)
        code: str = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
        return code

    code = configure(snippets()["Sign in"], AUTH_ENVIRONMENT_ID=env_id, REDIRECT_URL=REDIRECT,
                     API_HOST=api.host, EMAIL=email)
    out = run(code, capsys, wait_for_redirect=wait_for_redirect, ask_for_totp_code=ask_for_totp_code,
              open_browser=lambda url: None)
    lines = out.splitlines()
    assert lines[0].startswith("methods: ") and "EMAIL_MAGIC_LINK" in lines[0]
    assert lines[1:] == [f"signed in as {user['endUserId']}"]
    if totp:
        assert len(seen_links) == 1 and str(seen_links[0]).startswith("otpauth://")
    else:
        assert seen_links == []
    with pk.PortalAuth(env_id, REDIRECT, api.host) as auth:
        restored = auth.restore_session()
        assert restored is not None and restored.end_user_id == user["endUserId"]
        restored.close()


def test_invalidation_snippet(pk: Any, env_id: str, api: PortalApi, keyring: Any, capsys: Any) -> None:
    code = configure(snippets()["Invalidation"], AUTH_ENVIRONMENT_ID=env_id, REDIRECT_URL=REDIRECT,
                     API_HOST=api.host)
    token = api.issue("readme-valid")
    with pk.PortalAuth(env_id, REDIRECT, api.host) as auth:
        auth.persist_session("readme-valid", token).close()
    assert run(code, capsys) == "HTTP 200\n"
    api.revoke(token)
    assert run(code, capsys) == "HTTP 401\nsession invalidated: show sign-in\n"
    assert keyring.run("count", "--schema", "io.portalhq.PortalKeyring.Session",
                       f"auth_environment_id={env_id}").stdout.strip() == b"0"


@pytest.mark.parametrize("totp", [False, True])
def test_asyncio_sign_in_snippet(pk: Any, env_id: str, api: PortalApi, capsys: Any, totp: bool) -> None:
    email = f"readme-async-{os.getpid()}-{int(totp)}@example.com"
    user = api.admin("end-users", {"email": email, "totpRequired": totp})
    seen_links: List[Optional[str]] = []

    async def wait_for_redirect() -> str:
        links = [e for e in api.admin("magic-links")["links"] if e["email"] == email]
        link: str = links[-1]["link"]
        return link

    async def ask_for_totp_code(link: Optional[str]) -> str:
        seen_links.append(link)
        code: str = api.admin(f"totp?endUserId={user['endUserId']}")["code"]
        return code

    code = configure(snippets()["Sign in with asyncio"], AUTH_ENVIRONMENT_ID=env_id, REDIRECT_URL=REDIRECT,
                     API_HOST=api.host, EMAIL=email)
    out = run(code, capsys, wait_for_redirect=wait_for_redirect, ask_for_totp_code=ask_for_totp_code,
              open_browser=lambda url: None)
    lines = out.splitlines()
    assert lines[0].startswith("methods: ") and "EMAIL_MAGIC_LINK" in lines[0]
    assert lines[1:] == [f"signed in as {user['endUserId']}"]
    assert len(seen_links) == int(totp) and all(str(link).startswith("otpauth://") for link in seen_links)
    with pk.PortalAuth(env_id, REDIRECT, api.host) as auth:
        restored = auth.restore_session()
        assert restored is not None and restored.end_user_id == user["endUserId"]
        restored.close()


def test_asyncio_snippet(pk: Any, env_id: str, api: PortalApi, capsys: Any) -> None:
    code = configure(snippets()["asyncio"], AUTH_ENVIRONMENT_ID=env_id, REDIRECT_URL=REDIRECT, API_HOST=api.host)
    assert run(code, capsys) == "signed out: show sign-in\n"
    with pk.PortalAuth(env_id, REDIRECT, api.host) as auth:
        auth.persist_session("readme-async", api.issue("readme-async")).close()
    assert run(code, capsys) == "HTTP 200\n"


def doc_python_blocks(path: str, section: str = "") -> List[str]:
    """The ```python blocks of a page of the docs (`path` from the repository's root), from the
    heading `section` on (from the top when empty)."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = f.read()
    start = text.index("\n" + section + "\n") if section else 0
    return re.findall(r"^```python\n(.*?)^```", text[start:], re.M | re.S)


def test_sign_in_doc_snippet_compiles_and_configures_magic_links(pk: Any) -> None:
    """docs/sign-in.md's magic-link Python lines are valid Python and give PortalAuth a
    MagicLinkConfig with the keyword names the package takes."""
    import ast

    block = doc_python_blocks("docs/sign-in.md", "## Magic links")[0]
    tree = ast.parse(block)
    calls = {node.func.attr: {k.arg for k in node.keywords} for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
    assert calls["PortalAuth"] == {"magic_link", "is_account_abstracted"}
    assert calls["MagicLinkConfig"] == {"from_email", "template_id"}
    pk.MagicLinkConfig(from_email="a@b.c", template_id="t")  # the names exist


def test_python_doc_snippet_runs_signed_out(pk: Any, env_id: str, capsys: Any) -> None:
    """docs/python.md's first Python snippet, as written, with only the auth environment id replaced:
    nothing is stored, so it restores None and never builds a Portal (no network)."""
    blocks = doc_python_blocks("docs/python.md")
    assert len(blocks) >= 2, "docs/python.md lost its Python snippets"
    code = blocks[0].replace("YOUR_AUTH_ENVIRONMENT_ID", env_id)
    called: List[str] = []
    namespace: Dict[str, Any] = {"__name__": "readme_snippet", "show_sign_in": lambda: called.append("x")}
    exec(compile(code, "docs/python.md", "exec"), namespace)
    assert namespace["session"] is None
    assert called == []


def test_python_doc_asyncio_snippet_compiles() -> None:
    """docs/python.md's asyncio lines are valid Python inside a coroutine (top-level await allowed)."""
    import ast

    blocks = doc_python_blocks("docs/python.md")
    compile(blocks[1], "docs/python.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
