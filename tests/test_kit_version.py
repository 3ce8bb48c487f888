"""The kit's version names the commit it runs from, read from the checkout's files as git
itself reads them (no `git` process per command): a loose ref, a packed ref, a detached HEAD
and a worktree all give what `git rev-parse HEAD` gives."""

from __future__ import annotations

import subprocess
from pathlib import Path

from runner.core.provenance import head_commit

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run([*GIT, "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def repo_with_two_commits(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for n in (1, 2):
        (repo / "f").write_text(str(n))
        git(repo, "add", "f")
        git(repo, "commit", "-q", "-m", str(n))
    return repo


def test_a_branch_head_loose_then_packed(tmp_path):
    repo = repo_with_two_commits(tmp_path)
    assert head_commit(repo) == git(repo, "rev-parse", "HEAD")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head_commit(repo) == git(repo, "rev-parse", "HEAD")


def test_a_detached_head(tmp_path):
    repo = repo_with_two_commits(tmp_path)
    first = git(repo, "rev-parse", "HEAD~1")
    git(repo, "checkout", "-q", "--detach", first)
    assert head_commit(repo) == first


def test_a_worktree_on_its_own_branch(tmp_path):
    repo = repo_with_two_commits(tmp_path)
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tree), "HEAD~1")
    assert head_commit(tree) == git(tree, "rev-parse", "HEAD")
    assert head_commit(tree) != head_commit(repo)


def test_not_a_checkout_or_an_unknown_layout_gives_none(tmp_path):
    assert head_commit(tmp_path) is None
    (tmp_path / ".git").write_text("something else\n")
    assert head_commit(tmp_path) is None
