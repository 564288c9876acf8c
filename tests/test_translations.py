"""The zh-Hans catalog is complete, compiled, and covers every marked string in the code."""

import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from django.utils import translation

ROOT = Path(__file__).resolve().parent.parent
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")


def test_every_catalog_entry_is_translated_and_not_fuzzy():
    catalog = polib.pofile(str(PO))
    assert not catalog.untranslated_entries(), [e.msgid for e in catalog.untranslated_entries()]
    assert not catalog.fuzzy_entries(), [e.msgid for e in catalog.fuzzy_entries()]
    assert catalog.percent_translated() == 100


def test_compiled_catalog_matches_the_source():
    source = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.pofile(str(PO))}
    compiled = {(e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.mofile(str(MO))}
    assert compiled == source, "run `make messages` to recompile django.mo"


def test_placeholders_survive_translation():
    for entry in polib.pofile(str(PO)):
        translations = [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())
        for text in translations:
            for token in ("%(", "{"):
                assert entry.msgid.count(token) == text.count(token), entry.msgid


def test_django_uses_the_catalog():
    with translation.override("zh-hans"):
        assert translation.gettext("My departments") == "我的部门"


@pytest.mark.skipif(shutil.which("xgettext") is None, reason="GNU gettext (xgettext) is not installed")
def test_no_marked_string_is_missing_from_the_catalog(tmp_path):
    """Re-extract into a copy of the tree and compare: new strings must be in django.po."""
    copy = tmp_path / "tree"
    for name in ("efficiency", "portal", "templates", "locale", "manage.py"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy / name)
    result = subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", "--no-location", "--no-obsolete"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PORTAL_VAR_DIR": str(tmp_path / "var")},
    )
    assert result.returncode == 0, result.stderr
    extracted = {e.msgid for e in polib.pofile(str(copy / "locale/zh_Hans/LC_MESSAGES/django.po"))}
    committed = {e.msgid for e in polib.pofile(str(PO))}
    assert extracted - committed == set(), "run `make messages` and translate the new strings"
