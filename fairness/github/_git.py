"""git for the regeneration pull request, with the token in the environment and never in argv.

Any local user can read a process's command line (/proc/PID/cmdline, `ps`), so the token
must not be on git's: it is put in a variable of git's own environment, and a credential
helper given through GIT_CONFIG_* variables (git 2.31+) prints it when the remote asks for
a password. The helper's text names the variable, never the token. Configured helpers are
reset first, so the token cannot end up in a user's credential store, and git never
prompts (GIT_TERMINAL_PROMPT=0): a refused token fails instead of hanging the job.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fairness._util.errors import FairnessError

TOKEN_VAR = "FAIRNESS_GIT_TOKEN"
"""The variable of git's environment the credential helper reads."""
_HELPER = f"!f() {{ test \"$1\" = get && printf 'username=x-access-token\\npassword=%s\\n' \"${TOKEN_VAR}\"; }}; f"


def git_env(token: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) plus the credential helper that answers `token`."""
    env = dict(os.environ if base is None else base)
    try:
        n = int(env.get("GIT_CONFIG_COUNT") or 0)
    except ValueError:
        n = 0
    env.update({
        f"GIT_CONFIG_KEY_{n}": "credential.helper", f"GIT_CONFIG_VALUE_{n}": "",  # forget configured helpers
        f"GIT_CONFIG_KEY_{n + 1}": "credential.helper", f"GIT_CONFIG_VALUE_{n + 1}": _HELPER,
        "GIT_CONFIG_COUNT": str(n + 2), "GIT_TERMINAL_PROMPT": "0", TOKEN_VAR: token,
    })
    return env


def git(repo: Path, *args: str, token: str | None = None) -> str:
    """Run git in `repo`; its stdout, or one line naming the git command that failed (the token masked)."""
    env = git_env(token) if token else None
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        message = " ".join((proc.stderr or proc.stdout).split())
        if token:
            message = message.replace(token, "***")
        raise FairnessError(f"git {args[0]} failed: {message[:500]}")
    return proc.stdout.strip()
