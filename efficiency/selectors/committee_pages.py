"""What the committee's pack pages read: the packs list and one pack, as the reader may see it.

Committee members and platform admins see every pack whole. A department head may open any pack,
but only as their copy: the cover and the parts of the departments they head
(``efficiency.analysis.committee.copy.department_copy``).
"""

from dataclasses import dataclass, field

from efficiency.choices import Role
from efficiency.models import ReviewPack
from efficiency.scoping import User, user_role
from efficiency.selectors import committee as packs

PACK_READERS = (Role.DEPARTMENT_HEAD, Role.COMMITTEE, Role.PLATFORM_ADMIN)
PACK_MANAGERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)


@dataclass
class PackEntry:
    """A pack's current version, and the versions it corrected (newest first)."""

    pack: ReviewPack
    older: list[ReviewPack] = field(default_factory=list)


def pack_list(*, user: User) -> list[PackEntry]:
    """Every review period's current pack, newest period first, older versions folded under it."""
    if user_role(user) not in PACK_READERS:
        return []
    packs = list(
        ReviewPack.objects.select_related("cluster", "supersedes").order_by("-period_start", "-version")
    )
    superseded = {p.supersedes_id for p in packs if p.supersedes_id}
    by_id = {p.pk: p for p in packs}
    entries = []
    for pack in packs:
        if pack.pk in superseded:
            continue
        entry = PackEntry(pack)
        previous = by_id.get(pack.supersedes_id)
        while previous is not None:
            entry.older.append(previous)
            previous = by_id.get(previous.supersedes_id)
        entries.append(entry)
    return entries


def pack_get(*, user: User, pk: int) -> ReviewPack:
    """One pack; ReviewPack.DoesNotExist for a missing one or a reader without a role."""
    if user_role(user) not in PACK_READERS or not 0 < pk < 2**31:
        raise ReviewPack.DoesNotExist(pk)
    return packs.pack_get(user=user, pk=pk)


def pack_successor(pack: ReviewPack) -> ReviewPack | None:
    """The version that corrects ``pack``, or None when it is current."""
    return ReviewPack.objects.filter(supersedes=pack).only("pk", "version").first()


def pack_is_copy(user: User) -> bool:
    """Whether ``user`` reads department copies rather than whole packs."""
    return user_role(user) == Role.DEPARTMENT_HEAD


def pack_view_content(*, user: User, pack: ReviewPack) -> dict:
    """The content ``user`` may read: the whole pack, or a head's department copy."""
    return packs.pack_content_for(user=user, pack=pack)
