"""Issue 39 §3: a user-named file a release depends on is refused if another user could change it.

Every path-valued option of every command (found from the typer apps, not from a list kept by hand) goes
through one checker, :func:`textdp.cli._common.check_read_paths` → :func:`textdp._cache.check_public_path`:
every folder from ``/`` down owned by root or you and not writable by others (unless root-owned and sticky),
every link on the way yours or root's, the file itself yours or root's and writable by nobody else. A refusal
is one line naming the component at fault and ``--allow-shared-files``, exit 2. The loaders check again
(``load_embeddings``, ``check_model_folder``, the word lists), so Python callers are covered too, and the small
public files are read once through the checked descriptor, their SHA-256 in the public settings.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import second_user, shared_folder
from typer.testing import CliRunner

from textdp._cache import allow_shared_files, check_public_path, read_public_file
from textdp.cli import COMMAND_MODULES, app, load_module_commands
from textdp.cli._common import STRING_PATHS, WRITTEN_PATHS, Command, read_path_params
from textdp.errors import ParameterError

runner = CliRunner()


def _commands() -> list[tuple[list[str], object]]:
    """Every leaf command of the CLI with the words that invoke it (``ledger show``, ``runs clean``, ...)."""
    out: list[tuple[list[str], object]] = []

    def walk(cmd: object, words: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*words, name])
        else:
            out.append((words, cmd))

    for module in COMMAND_MODULES:
        for name, cmd in load_module_commands(module).items():
            walk(cmd, [name])
    return out


def _is_path(param: object) -> bool:
    td = getattr(param, "type_descriptor", None)
    return td is not None and "Path" in str(td.annotation)


def test_every_path_valued_option_is_either_written_state_or_checked():
    seen: set[str] = set()
    for words, cmd in _commands():
        for p in cmd.params:  # type: ignore[attr-defined]
            if not (_is_path(p) or (p.name in STRING_PATHS and p.type_descriptor.annotation is str)):
                continue
            seen.add(p.name)
            if p.name in WRITTEN_PATHS:
                continue
            assert p in read_path_params(cmd), f"{' '.join(words)} {p.opts}: a path option that is not checked"
            assert isinstance(cmd, Command), f"{' '.join(words)}: reads {p.opts} but is not a textdp Command"
            assert any(q.opts == ["--allow-shared-files"] for q in cmd.params), words  # type: ignore[attr-defined]
    # the files the issue names are among them
    assert {"embeddings", "words", "vocabulary", "domain_vocab", "prompt_file", "clip_public", "model", "model_dir",
            "init_from", "files", "corpus", "config"} <= seen


def test_string_options_that_name_files_are_declared():
    """An option typed ``str`` whose help offers FILE must be in STRING_PATHS (else it would escape the checker)."""
    for words, cmd in _commands():
        for p in cmd.params:  # type: ignore[attr-defined]
            td = getattr(p, "type_descriptor", None)
            if td is None or td.annotation is not str:
                continue
            if "FILE" in (getattr(p, "help", "") or "").replace("--prompt-file FILE", "").replace("--clip-public FILE",
                                                                                                     ""):
                assert p.name in STRING_PATHS, f"{' '.join(words)} {p.opts} names a file but is not checked"


def _invocations(safe: Path, shared_file: Path) -> list[tuple[str, list[str]]]:
    """For every checked option of every command: the argument list that gives it ``shared_file`` (others safe)."""
    out = []
    for words, cmd in _commands():
        for target in read_path_params(cmd):
            args = list(words)
            for p in cmd.params:  # type: ignore[attr-defined]
                value = shared_file if p is target else ((safe if _is_path(p) else "1") if p.required else None)
                if value is None:
                    continue
                if p.param_type_name == "argument":
                    args.append(str(value))
                else:
                    args += [p.opts[0], str(value)]
            # options after the arguments: click takes them anywhere
            out.append((f"{' '.join(words)} {target.opts[0]}", args))
    return out


def test_every_checked_option_refuses_a_file_in_a_folder_others_can_write(tmp_path):
    safe = tmp_path / "safe.txt"
    safe.write_text("a public word list\nword\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could rename a file of theirs over the one named
    planted = shared / "file.txt"
    planted.write_text("word\nother\n")
    cases = _invocations(safe, planted)
    assert len(cases) >= 20
    for label, args in cases:
        res = runner.invoke(app, args)
        out = res.output.strip()
        assert res.exit_code == 2, (label, out)
        assert "\n" not in out and out.startswith("error: "), (label, out)
        assert f"the folder {shared} on its path is writable by others" in out, (label, out)
        assert "--allow-shared-files" in out, (label, out)


def test_the_checker_names_the_file_the_link_and_the_folder(tmp_path):
    f = tmp_path / "emb.npy"
    f.write_bytes(b"x")
    assert check_public_path(f) == f.resolve()
    f.chmod(0o646)
    with pytest.raises(ParameterError, match=r"emb.npy is writable by others \(mode 646\).*--allow-shared-files"):
        check_public_path(f, what="--embeddings")
    with allow_shared_files():
        assert check_public_path(f) == f.resolve()
        assert read_public_file(f).data == b"x"


def _toy_embeddings(folder: Path) -> tuple[Path, Path]:
    words = ["cat", "dog", "fox", "owl", "boat"]
    vecs = np.eye(5, 4, dtype=np.float32) + np.arange(20, dtype=np.float32).reshape(5, 4) / 100
    np.save(folder / "emb.npy", vecs)
    (folder / "emb.words.txt").write_text("\n".join(words) + "\n")
    return folder / "emb.npy", folder / "emb.words.txt"


def _obfuscate(tmp_path: Path, emb: Path, words: Path, *extra: str):
    doc = tmp_path / "doc.txt"
    doc.write_text("cat dog fox")
    out = tmp_path / "out.jsonl"
    for p in (out, Path(f"{out}.settings.json")):
        p.unlink(missing_ok=True)
    return runner.invoke(app, ["obfuscate", str(doc), "-e", "5", "-n", "2", "--embeddings", str(emb), "--words",
                               str(words), "--seed", "1", "-o", str(out), *extra]), out


def test_settings_give_the_sha256_of_the_embeddings_and_words(tmp_path):
    emb, words = _toy_embeddings(tmp_path)
    res, out = _obfuscate(tmp_path, emb, words)
    assert res.exit_code == 0, res.output
    settings = json.loads(Path(f"{out}.settings.json").read_text())
    assert settings["embeddings_sha256"] == hashlib.sha256(emb.read_bytes()).hexdigest()
    assert settings["words_sha256"] == hashlib.sha256(words.read_bytes()).hexdigest()


def test_embeddings_another_user_could_swap_are_refused_as_two_users(tmp_path):
    """The issue's attack: --embeddings X.npy in a folder another user can rename in (their folder, their file, their
    link). Each is refused before anything is read; --allow-shared-files accepts it, and the hash shows what was used."""
    with second_user() as (uid, gid), shared_folder() as sticky:
        theirs = sticky / "theirs"
        theirs.mkdir()
        emb, words = _toy_embeddings(theirs)
        os.chown(theirs, uid, gid)  # their folder (0755): they can rename a x1000 copy over emb.npy at any time
        res, _ = _obfuscate(tmp_path, emb, words)
        assert res.exit_code == 2 and f"the folder {theirs} on its path is owned by another user" in res.output
        assert "--allow-shared-files" in res.output and len(res.output.strip().splitlines()) == 1

        mine = sticky / "mine"
        mine.mkdir(mode=0o755)
        emb2, words2 = _toy_embeddings(mine)
        os.chown(emb2, uid, gid)  # their file in my folder: they can rewrite it in place
        res, _ = _obfuscate(tmp_path, emb2, words2)
        assert res.exit_code == 2 and f"{emb2} is owned by another user (uid {uid})" in res.output

        os.chown(emb2, 0, 0)
        link = sticky / "link.npy"
        link.symlink_to(emb2)
        os.lchown(link, uid, gid)  # their link: they could point it elsewhere
        res, _ = _obfuscate(tmp_path, link, words2)
        assert res.exit_code == 2 and f"{link} is a link owned by another user" in res.output

        res, out = _obfuscate(tmp_path, emb, words, "--allow-shared-files")
        assert res.exit_code == 0, res.output
        settings = json.loads(Path(f"{out}.settings.json").read_text())
        assert settings["embeddings_sha256"] == hashlib.sha256(emb.read_bytes()).hexdigest()


def test_the_library_loaders_refuse_too(tmp_path):
    from textdp.embeddings import load_embeddings
    from textdp.topics.vocabulary import read_vocabulary

    shared = tmp_path / "shared"
    shared.mkdir()
    emb, words = _toy_embeddings(shared)
    (shared / "vocab.txt").write_text("cat\ndog\nboat\n")
    shared.chmod(0o777)
    with pytest.raises(ParameterError, match="writable by others.*--allow-shared-files"):
        load_embeddings(emb, words_path=words)
    with pytest.raises(ParameterError, match="writable by others.*--allow-shared-files"):
        read_vocabulary(shared / "vocab.txt")
    with allow_shared_files():
        assert len(load_embeddings(emb, words_path=words).words) == 5
        v = read_vocabulary(shared / "vocab.txt")
    assert hashlib.sha256(b"cat\ndog\nboat\n").hexdigest() in v.name


def test_a_model_folder_reached_through_another_users_link_one_level_up_is_refused(tmp_path):
    """SECURITY.md used to check only a link named last: ``models -> their folder`` one level up passed."""
    from textdp.generation.folders import check_model_folder

    with second_user() as (uid, gid):
        real = tmp_path / "real"
        (real / "m").mkdir(parents=True)
        (real / "m" / "config.json").write_text("{}")
        link = tmp_path / "models"
        link.symlink_to(real)
        assert check_model_folder(link / "m") == (real / "m").resolve()  # my own link: followed
        os.lchown(link, uid, gid)
        with pytest.raises(ParameterError, match=f"{link} is a link owned by another user.*--allow-shared-files"):
            check_model_folder(link / "m")
        os.lchown(link, 0, 0)
        os.chown(real / "m" / "config.json", uid, gid)  # their file inside my model folder
        with pytest.raises(ParameterError, match="config.json is owned by another user or writable by others"):
            check_model_folder(link / "m")
        with allow_shared_files():
            assert check_model_folder(link / "m") == (real / "m").resolve()
