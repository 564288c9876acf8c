import os
import tempfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.utils import translation
from hypothesis import settings as hypothesis_settings

from efficiency.choices import Role, SourceKind
from tests.factories import DataSourceFactory, DepartmentFactory, JobFactory, NodeFactory, UserFactory

PASSWORD = "correct horse battery"

# Property tests: a few examples while you work ("dev", the default), many more in CI
# (.ci/run sets HYPOTHESIS_PROFILE=ci), with the blob that reproduces a failure printed. Tests on
# the database are slow per example, so no deadline. A test should not set max_examples itself:
# a pinned number defeats both profiles.
hypothesis_settings.register_profile("dev", max_examples=10, deadline=None)
hypothesis_settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=False, print_blob=True
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
TEST_SOURCE_ROOTS = (tempfile.gettempdir(), str(Path(__file__).resolve().parent / "fixtures"))


# Files of one to a few tests that take minutes. Under xdist (``make test``: --dist loadfile
# --no-loadscope-reorder) they are handed out first, so that no worker is left running one of
# them alone at the end while the other has finished; the other files follow, those with the most
# tests first (what xdist's own reordering does). A file renamed here only loses its place.
HEAVY_FILES = (
    "tests/e2e/test_pages_journey.py",
    "tests/services/test_demo_ticket_verification.py",
    "tests/services/test_demo_recommendations.py",
    "tests/services/test_demo_faults.py",
    "tests/test_run_command.py",
    "tests/test_settings.py",
    "tests/e2e/test_utilization_journey.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(
        enumerate(files.items()),
        key=lambda entry: (
            HEAVY_FILES.index(entry[1][0]) if entry[1][0] in HEAVY_FILES else len(HEAVY_FILES),
            -len(entry[1][1]),
            entry[0],
        ),
    )
    items[:] = [item for _, (_, file_items) in order for item in file_items]


@pytest.fixture(autouse=True)
def _source_roots(settings):
    # File sources may read only under PORTAL_SOURCE_ROOTS; tests read fixtures and tmp_path.
    settings.PORTAL_SOURCE_ROOTS = [*settings.PORTAL_SOURCE_ROOTS, *TEST_SOURCE_ROOTS]


@pytest.fixture(autouse=True)
def _default_language():
    # A request leaves its language active in the thread (LocaleMiddleware does not reset it), so
    # a test after a Chinese page would read Chinese messages: each test starts in the default.
    translation.activate(django_settings.LANGUAGE_CODE)
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _empty_cache():
    # The database goes back after each test, the process's cache does not: the pages' cache
    # (keyed by rollup versions that restart with the database) would hand one test another's.
    cache.clear()
    return


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings):
    # The default PBKDF2 costs ~0.3 s a login; tests log in hundreds of times.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True, scope="session")
def _static_files_listed_once():
    """Every test client builds its own middleware, and WhiteNoise's (serving from the finders
    outside production) lists and stats every static file each time: ~0.1 s a client, most of a
    test that signs in hundreds of times. The listing is the same while the settings it reads are:
    list once per such configuration and give each new middleware the same file table (WhiteNoise
    shares that table between all requests of one middleware anyway)."""
    from whitenoise.middleware import WhiteNoiseMiddleware

    listed: dict[tuple, dict] = {}
    scan = WhiteNoiseMiddleware.add_files_from_finders

    def add_files_from_finders(self):
        key = (
            self.static_prefix, self.max_age, self.allow_all_origins, self.charset,
            repr(sorted(self.media_types.types_map.items())), self.add_headers_function,
            self.index_file, getattr(self.immutable_file_test, "__func__", self.immutable_file_test),
            repr(django_settings.STATICFILES_DIRS), repr(django_settings.STATICFILES_FINDERS),
            tuple(django_settings.INSTALLED_APPS),
        )  # fmt: skip
        if key not in listed:
            before = dict(self.files)
            scan(self)
            listed[key] = {url: file for url, file in self.files.items() if before.get(url) is not file}
        self.files.update(listed[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WhiteNoiseMiddleware, "add_files_from_finders", add_files_from_finders)
        yield


@pytest.fixture
def org(db):
    """Two departments, each with a node and a job, and one user per role.

    ``head_a`` heads department A only; ``head_b`` heads B only.
    """
    dept_a = DepartmentFactory(code="vision", name="Vehicle vision")
    dept_b = DepartmentFactory(code="radar", name="Radar perception")
    node_a = NodeFactory(hostname="gpu-a01", owner_department=dept_a)
    node_b = NodeFactory(hostname="gpu-b01", owner_department=dept_b, cluster=node_a.cluster)
    job_a = JobFactory(department=dept_a, cluster=node_a.cluster, name="vision-train")
    job_a.nodes.add(node_a)
    job_b = JobFactory(department=dept_b, cluster=node_a.cluster, name="radar-train")
    job_b.nodes.add(node_b)
    # Its shipper forwards the nodes' kernel logs too (kern/<host>.log), as the fault tests need.
    source = DataSourceFactory(
        cluster=node_a.cluster, kind=SourceKind.LOG_PUSH, name="push", config={"kernel_logs": True}
    )
    return type(
        "Org",
        (),
        {
            "dept_a": dept_a,
            "dept_b": dept_b,
            "node_a": node_a,
            "node_b": node_b,
            "job_a": job_a,
            "job_b": job_b,
            "cluster": node_a.cluster,
            "source": source,
            "head_a": UserFactory(username="head-a", role=(Role.DEPARTMENT_HEAD, "vision")),
            "head_b": UserFactory(username="head-b", role=(Role.DEPARTMENT_HEAD, "radar")),
            "committee": UserFactory(username="committee", role=Role.COMMITTEE),
            "admin": UserFactory(username="admin", role=Role.PLATFORM_ADMIN),
            "no_role": UserFactory(username="nobody"),
        },
    )
