"""Secrets in the key formats that agents' logs and commands carry are replaced."""

from __future__ import annotations

import pytest

from domain.redact import redact, redact_bytes

SECRETS = {
    "anthropic": "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4,
    "openai": "sk-proj-" + "Zy9Xw8Vu7Ts6Rq5Po4Nm" * 2,
    "huggingface": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
    "github": "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345",
    "google": "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
    "aws-key-id": "AKIA" + "IOSFODNN7EXAMPLE",
    "slack": "xoxb-" + "1234567890-abcdefghijKLMN",
    "gitlab": "glpat-" + "AbCdEfGhIjKlMnOpQrSt12",
}
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1b2c3d4\nZ9y8x7w6v5u4\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("kind, secret", SECRETS.items())
def test_each_key_format_is_replaced_by_its_kind(kind: str, secret: str) -> None:
    out = redact(f"export X={secret} && python train.py --key {secret}")
    assert secret not in out and secret[8:20] not in out
    assert out.count(f"[REDACTED:{kind}]") >= 1


def test_bearer_tokens_and_secret_assignments() -> None:
    line = (
        'curl -H "Authorization: Bearer abcdefghijklmnop0123456789" '
        "WANDB_API_KEY=0123456789abcdef0123 aws_secret_access_key = wJalrXUtnFEMI/K7MDENG "
        '{"hf_token": "plainsecretvalue99"}'
    )
    out = redact(line)
    for secret in ("abcdefghijklmnop0123456789", "0123456789abcdef0123", "wJalrXUtnFEMI", "plainsecretvalue99"):
        assert secret not in out
    assert "WANDB_API_KEY=[REDACTED:secret]" in out
    assert "[REDACTED:bearer]" in out


def test_ordinary_training_output_is_left_alone() -> None:
    text = (
        "step 10/40 loss 0.412345 grad_norm 1.234567\nTOKENIZERS_PARALLELISM=false\n"
        "Counter: aten::nonzero\n  Value: 40\nsk-learn is not a key; max_tokens=1024"
    )
    assert redact(text) == text


def test_bytes_that_are_not_utf8_survive() -> None:
    data = b"\xff\xfe key=" + SECRETS["github"].encode() + b" \x80 end"
    out = redact_bytes(data)
    assert out.startswith(b"\xff\xfe key=[REDACTED:github]") and out.endswith(b" \x80 end")


def test_private_key_blocks_are_replaced_whole_even_when_cut_off() -> None:
    out = redact(f"log before\n{PRIVATE_KEY}\nlog after")
    assert "MIIEow" not in out and "Z9y8x7" not in out and "[REDACTED:private-key]" in out
    assert out.startswith("log before\n") and out.endswith("\nlog after")
    cut = redact("x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n")  # the log ends inside it
    assert "b3BlbnNz" not in cut and cut.startswith("x\n")


def test_every_caller_goes_through_the_one_redact() -> None:
    """domain/redact.py is the only place that knows a secret's shape: no other module defines a
    `redact`, writes a `[REDACTED:` marker or imports a redact function from anywhere else."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for package in ("domain", "storage", "workbench", "screens", "cli"):
        for path in (root / package).rglob("*.py"):
            if path == root / "domain" / "redact.py":
                continue
            source = path.read_text()
            tree = ast.parse(source)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("redact"):
                    offenders.append(f"{path.relative_to(root)}: defines {node.name}")
                if isinstance(node, ast.ImportFrom) and any("redact" in a.name for a in node.names):
                    if node.module != "domain.redact":
                        offenders.append(f"{path.relative_to(root)}: imports redact from {node.module}")
            if "[REDACTED:" in source:
                offenders.append(f"{path.relative_to(root)}: writes its own [REDACTED: marker")
    assert not offenders, "\n".join(offenders)
