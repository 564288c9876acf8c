"""The zh-Hans catalog is complete, compiled, and covers every marked string in the code."""

import re
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
    source = {
        (e.msgctxt, e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.pofile(str(PO))
    }
    compiled = {
        (e.msgctxt, e.msgid, e.msgid_plural): (e.msgstr, e.msgstr_plural) for e in polib.mofile(str(MO))
    }
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


CJK = "\u2e80-\u9fff\uf900-\ufaff"
# An ASCII comma, colon, semicolon or parenthesis touching a Chinese character (spaces between
# count too): Chinese text takes ，：；（）.
ASCII_PUNCTUATION_IN_CHINESE = re.compile(rf"[{CJK}]\s*[,:;()]|[,:;()]\s*[{CJK}]")


def _translations(entry) -> list[str]:
    return [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())


def test_chinese_sentences_use_full_width_commas_colons_semicolons_and_parentheses():
    found = [
        (entry.msgid, text)
        for entry in polib.pofile(str(PO))
        for text in _translations(entry)
        # "yes,no" is the argument of Django's yesno filter: a list, whose commas it splits on.
        if ASCII_PUNCTUATION_IN_CHINESE.search(text) and entry.msgid != "yes,no"
    ]
    assert not found, "use ，：；（） in Chinese text: " + repr(found[:10])


# English words that have a proper Chinese word; product and protocol names (GPU, NCCL, Slurm,
# MTTR, …) and API literals (true, null) stay as they are.
# A literal setting (NCCL_NET=Socket, NET/Socket) stays as the software spells it.
ENGLISH_WITH_A_CHINESE_WORD = re.compile(r"(?<![=/])\b(pp|[Ww]orkers?|Socket)\b")


def test_no_english_word_is_left_where_chinese_has_one():
    found = [
        (entry.msgid, text)
        for entry in polib.pofile(str(PO))
        for text in _translations(entry)
        if ENGLISH_WITH_A_CHINESE_WORD.search(text)
    ]
    assert not found, found[:10]


def test_percentage_points_read_as_chinese():
    from efficiency.templatetags.portal import signed_points

    with translation.override("zh-hans"):
        assert signed_points(4.5) == "+4.5 个百分点"
        assert signed_points(-0.25) == "-0.2 个百分点"
    with translation.override("en"):
        assert signed_points(4.5) == "+4.5 pp"


def test_durations_of_days_read_as_chinese():
    from efficiency.templatetags.portal import duration

    with translation.override("zh-hans"):
        assert duration(9 * 86400 + 3723) == "9天 01:02:03"
    with translation.override("en"):
        assert duration(9 * 86400 + 3723) == "9d 01:02:03"
