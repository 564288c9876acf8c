"""dcgm-exporter samples → GpuReading: label drift, units, blanks and bad values."""

from pathlib import Path

import pytest

from efficiency.collectors.dcgm import gpu_readings_from_samples, is_dcgm_blank
from efficiency.collectors.exposition import parse_exposition
from efficiency.collectors.records import GpuReading, ParseOutcome

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dcgm"
SCRAPE_MS = 1_767_000_000_000
LABELS = 'gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-a01"'


def readings_from(text: str, default_hostname: str = "") -> ParseOutcome[GpuReading]:
    parsed = parse_exposition(text)
    assert parsed.rejected == [], "test input must be valid exposition text"
    return gpu_readings_from_samples(
        parsed.records, scrape_time_ms=SCRAPE_MS, default_hostname=default_hostname
    )


def only_reading(text: str, default_hostname: str = "") -> GpuReading:
    outcome = readings_from(text, default_hostname)
    (reading,) = outcome.records
    return reading


def reasons(outcome: ParseOutcome[GpuReading]) -> list[str]:
    return [r.reason for r in outcome.rejected]


# --- real pages ----------------------------------------------------------------------------------

READINGS_PER_FIXTURE = {
    "dcgm_exporter_issue272_lowercase_a100_mig.txt": 2,  # two MIG instances, lower-case names
    "dcgm_exporter_issue277_prometheus_view.txt": 0,  # no values at all
    "dcgm_exporter_issue317_xid_a30_mig.txt": 2,
    "dcgm_exporter_issue363_rtx_a5000.txt": 1,
    "dcgm_exporter_issue512_h100_mig_pods.txt": 3,
    "dcgm_exporter_issue58_titan_v.txt": 0,  # SM_CLOCK only: not a metric we map
    "dcgm_exporter_issue68_a30_mig_busy.txt": 1,
    "dcgm_exporter_issue68_a30_mig_idle.txt": 0,  # PIPE_TENSOR / DRAM only
    "dcgm_exporter_k8s_doc_pod_attributed.txt": 0,
    "dcgm_exporter_pr239_xid_count.txt": 0,  # the sample is named DCGM_FI_DEV_XID_ERRORS_ACTIVE (sic)
    "dcgm_exporter_readme_quickstart.txt": 0,  # clocks and MEMORY_TEMP only
    "dcgm_issue235_prometheus_view_xid.txt": 0,
    "dra_driver_nvidia_gpu_issue166_a100_mig.txt": 1,
    "gpu_monitoring_tools_issue138_older_labels.txt": 1,
}


def test_every_fixture_is_listed():
    assert sorted(p.name for p in FIXTURES.glob("*.txt")) == sorted(READINGS_PER_FIXTURE)


@pytest.mark.parametrize(("name", "count"), READINGS_PER_FIXTURE.items())
def test_fixture_maps_to_the_readings_counted_by_hand(name, count):
    samples = parse_exposition((FIXTURES / name).read_text()).records
    outcome = gpu_readings_from_samples(samples, scrape_time_ms=SCRAPE_MS, default_hostname="scraped-node")

    assert len(outcome.records) == count
    assert outcome.rejected == []


def test_older_exporter_without_hostname_uses_the_default_hostname():
    samples = parse_exposition((FIXTURES / "gpu_monitoring_tools_issue138_older_labels.txt").read_text())
    outcome = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS, default_hostname="gpu-b07")

    assert outcome.records == [
        GpuReading(
            hostname="gpu-b07",
            gpu_index=0,
            timestamp_ms=SCRAPE_MS,
            uuid="GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116",
            util_pct=44.0,
            power_w=302.206,
            temp_c=55.0,
        )
    ]


def test_older_exporter_without_any_hostname_is_rejected_per_sample():
    samples = parse_exposition((FIXTURES / "gpu_monitoring_tools_issue138_older_labels.txt").read_text())
    outcome = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS)

    assert outcome.records == []
    # GPU_TEMP, POWER_USAGE and GPU_UTIL; the five other metrics are not mapped.
    assert reasons(outcome) == ["no Hostname label and no default hostname"] * 3


def test_h100_mig_page_gives_one_reading_per_instance_with_its_pod():
    samples = parse_exposition((FIXTURES / "dcgm_exporter_issue512_h100_mig_pods.txt").read_text())
    outcome = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS)

    assert [(r.hostname, r.gpu_index, r.mig_instance, r.namespace, r.pod) for r in outcome.records] == [
        (
            "gsrh100-074",
            0,
            "7",
            "model-playground-stg",
            "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        ),
        ("gsrh100-074", 0, "8", "", ""),
        ("gsrh100-074", 0, "9", "model-playground-stg", "tts-predictor-00011-deployment-5554f75554-8j8pl"),
    ]
    assert {r.gr_engine_active_pct for r in outcome.records} == {0.0}
    assert {r.model for r in outcome.records} == {"NVIDIA H100 80GB HBM3"}
    assert {r.uuid for r in outcome.records} == {"GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"}


def test_a30_busy_instance_ratio_becomes_percent():
    samples = parse_exposition((FIXTURES / "dcgm_exporter_issue68_a30_mig_busy.txt").read_text())
    (reading,) = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS).records

    assert reading.hostname == "dcgm-exporter-sn5rp"  # the exporter pod, as the source says
    assert reading.mig_instance == "1"
    assert reading.gr_engine_active_pct == pytest.approx(38.1124)


def test_lowercase_names_and_pod_name_labels_are_understood():
    samples = parse_exposition((FIXTURES / "dcgm_exporter_issue272_lowercase_a100_mig.txt").read_text())
    outcome = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS, default_hostname="a100-n3")

    assert [(r.hostname, r.mig_instance, r.uuid, r.gr_engine_active_pct, r.pod) for r in outcome.records] == [
        ("a100-n3", "1", "GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", 0.0, ""),
        ("a100-n3", "2", "GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", 0.0, ""),
    ]


def test_rtx_page_maps_util_and_framebuffer():
    samples = parse_exposition((FIXTURES / "dcgm_exporter_issue363_rtx_a5000.txt").read_text())
    (reading,) = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS).records

    assert (reading.hostname, reading.model, reading.util_pct, reading.fb_used_mib) == (
        "k8s-gpu1",
        "NVIDIA RTX A5000",
        0.0,
        21383.0,
    )


def test_xid_gauge_on_mig_instances_reads_zero():
    samples = parse_exposition((FIXTURES / "dcgm_exporter_issue317_xid_a30_mig.txt").read_text())
    outcome = gpu_readings_from_samples(samples.records, scrape_time_ms=SCRAPE_MS)

    assert [(r.mig_instance, r.xid_last) for r in outcome.records] == [("3", 0), ("4", 0)]


# --- metrics and units ---------------------------------------------------------------------------


def test_each_metric_lands_in_its_field_in_portal_units():
    reading = only_reading(
        f"DCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 87\n"
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{LABELS}}} 0.634000\n"
        f"DCGM_FI_PROF_SM_ACTIVE{{{LABELS}}} 0.5\n"
        f"DCGM_FI_DEV_FB_USED{{{LABELS}}} 61234\n"
        f"DCGM_FI_DEV_POWER_USAGE{{{LABELS}}} 512.250000\n"
        f"DCGM_FI_DEV_GPU_TEMP{{{LABELS}}} 61\n"
    )

    assert reading.util_pct == 87.0
    assert reading.gr_engine_active_pct == pytest.approx(63.4)
    assert reading.sm_active_pct == 50.0
    assert (reading.fb_used_mib, reading.power_w, reading.temp_c) == (61234.0, 512.25, 61.0)
    assert (reading.hostname, reading.gpu_index, reading.uuid, reading.model) == (
        "gpu-a01",
        0,
        "GPU-1",
        "NVIDIA H100 80GB HBM3",
    )
    assert reading.timestamp_ms == SCRAPE_MS


def test_metric_absent_from_the_page_stays_none():
    reading = only_reading(f"DCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 87\n")

    assert reading.gr_engine_active_pct is None
    assert reading.xid_last is None
    assert reading.xid_counts == ()


def test_xid_gauge_gives_the_last_code_and_the_count_metric_counts_per_code():
    reading = only_reading(
        f"DCGM_FI_DEV_XID_ERRORS{{{LABELS}}} 79\n"
        f'DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},window_size_in_ms="300000",xid="79"}} 2\n'
        f'DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},window_size_in_ms="300000",xid="13"}} 1\n'
    )

    assert reading.xid_last == 79
    assert reading.xid_counts == ((13, 1.0), (79, 2.0))


def test_xid_count_with_a_non_integer_xid_label_is_rejected():
    outcome = readings_from(
        f'DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},xid="seventy-nine"}} 2\n'
        f'DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},xid="48"}} 1\n'
    )

    assert outcome.records[0].xid_counts == ((48, 1.0),)
    assert reasons(outcome) == ["xid label is not an integer"]


def test_fractional_xid_code_is_rejected():
    outcome = readings_from(f"DCGM_FI_DEV_XID_ERRORS{{{LABELS}}} 79.5\n")

    assert outcome.records[0].xid_last is None
    assert reasons(outcome) == ["Xid code is not an integer"]


def test_other_metrics_are_ignored_without_rejection():
    outcome = readings_from(
        f"DCGM_FI_DEV_SM_CLOCK{{{LABELS}}} 1410\n"
        f'DCGM_FI_DEV_MEMORY_TEMP{{gpu="not-a-gpu"}} 9223372036854775794\n'
        "process_cpu_seconds_total 12.5\n"
    )

    assert outcome.records == []
    assert outcome.rejected == []


# --- labels ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "labels",
    [
        'gpu="0",UUID="GPU-9",Hostname="h",namespace="vision",pod="train-0"',
        'gpu="0",uuid="GPU-9",Hostname="h",pod_namespace="vision",pod_name="train-0"',
    ],
)
def test_label_spellings_of_old_and_new_exporters_mean_the_same(labels):
    reading = only_reading(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 5\n")

    assert (reading.uuid, reading.namespace, reading.pod) == ("GPU-9", "vision", "train-0")


def test_empty_or_absent_pod_labels_are_empty_strings():
    outcome = readings_from(
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",container="",namespace="",pod=""} 5\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="h"} 6\n'
    )

    assert [(r.gpu_index, r.namespace, r.pod) for r in outcome.records] == [(0, "", ""), (1, "", "")]


def test_hostname_label_wins_over_the_default_hostname():
    reading = only_reading(f"DCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 5\n", default_hostname="scraped-node")

    assert reading.hostname == "gpu-a01"


def test_missing_hostname_falls_back_to_the_default_and_is_rejected_without_one():
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5\n'

    assert only_reading(text, default_hostname="gpu-b02").hostname == "gpu-b02"
    outcome = readings_from(text)
    assert outcome.records == []
    assert reasons(outcome) == ["no Hostname label and no default hostname"]


def test_mig_instances_and_the_whole_gpu_are_separate_readings():
    outcome = readings_from(
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h"} 50\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="h",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 0.25\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",Hostname="h",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2"} 0.75\n'
    )

    assert [(r.mig_instance, r.temp_c, r.gr_engine_active_pct) for r in outcome.records] == [
        ("", 50.0, None),
        ("1", None, 25.0),
        ("2", None, 75.0),
    ]


@pytest.mark.parametrize(("gpu", "reason"), [('gpu="x1"', "gpu label is not an integer"),
                                              ('gpu="-1"', "gpu label is not an integer"),
                                              ('gpu=" 1"', "gpu label is not an integer"),
                                              ('gpu="١"', "gpu label is not an integer"),
                                              ('device="nvidia0"', "no gpu label")])  # fmt: skip
def test_sample_without_an_integer_gpu_label_is_rejected(gpu, reason):
    outcome = readings_from(
        f'DCGM_FI_DEV_GPU_UTIL{{{gpu},Hostname="h"}} 5\nDCGM_FI_DEV_GPU_UTIL{{gpu="3",Hostname="h"}} 6\n'
    )

    assert [(r.gpu_index, r.util_pct) for r in outcome.records] == [(3, 6.0)]
    assert reasons(outcome) == [reason]


def test_readings_of_two_hosts_are_kept_apart():
    outcome = readings_from(
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h1"} 5\nDCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h2"} 6\n'
    )

    assert [(r.hostname, r.util_pct) for r in outcome.records] == [("h1", 5.0), ("h2", 6.0)]


def test_first_value_stands_when_a_gpu_is_listed_once_per_pod():
    reading = only_reading(
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="a"} 40\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="b"} 41\n'
    )

    assert (reading.pod, reading.util_pct) == ("a", 40.0)


# --- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "blank",
    [
        "9223372036854775794",  # INT64 NOT_SUPPORTED, as in the exporter's README
        "9223372036854775792",  # INT64 BLANK
        "9223372036854775807",
        "2147483632",  # INT32 BLANK
        "2147483635",  # INT32 NOT_PERMISSIONED
        "140737488355328.000000",  # FP64 BLANK as the exporter prints doubles
        "140737488355330.000000",  # FP64 NOT_SUPPORTED
    ],
)
def test_dcgm_blank_values_mean_not_reported(blank):
    outcome = readings_from(f"DCGM_FI_DEV_GPU_TEMP{{{LABELS}}} {blank}\nDCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 9\n")

    (reading,) = outcome.records
    assert reading.temp_c is None
    assert reading.util_pct == 9.0
    assert outcome.rejected == []


def test_blank_check_leaves_real_values_alone():
    assert not is_dcgm_blank(0.0)
    assert not is_dcgm_blank(81_559.0)  # FB_USED of an 80 GB card, MiB
    assert not is_dcgm_blank(2_147_483_631.0)
    assert is_dcgm_blank(2**63)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_value_that_is_not_finite_is_none_and_counted(value):
    outcome = readings_from(
        f"DCGM_FI_DEV_POWER_USAGE{{{LABELS}}} {value}\nDCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 9\n"
    )

    (reading,) = outcome.records
    assert reading.power_w is None
    assert reading.util_pct == 9.0
    assert reasons(outcome) == ["not a finite number"]


def test_negative_value_is_rejected_and_the_rest_of_the_reading_stays():
    outcome = readings_from(f"DCGM_FI_DEV_GPU_TEMP{{{LABELS}}} -3\nDCGM_FI_DEV_FB_USED{{{LABELS}}} 1024\n")

    (reading,) = outcome.records
    assert (reading.temp_c, reading.fb_used_mib) == (None, 1024.0)
    assert reasons(outcome) == ["negative value"]
    assert outcome.rejected[0].excerpt.startswith("DCGM_FI_DEV_GPU_TEMP{gpu=")


@pytest.mark.parametrize(
    ("metric", "value"),
    [
        ("DCGM_FI_DEV_GPU_UTIL", "101"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1.2"),
        ("DCGM_FI_PROF_SM_ACTIVE", "3"),
    ],
)
def test_percentage_above_100_after_scaling_is_rejected(metric, value):
    outcome = readings_from(f"{metric}{{{LABELS}}} {value}\nDCGM_FI_DEV_GPU_TEMP{{{LABELS}}} 40\n")

    (reading,) = outcome.records
    assert (reading.util_pct, reading.gr_engine_active_pct, reading.sm_active_pct) == (None, None, None)
    assert reading.temp_c == 40.0
    assert reasons(outcome) == ["percentage above 100"]


def test_full_ratio_is_exactly_100_percent():
    reading = only_reading(
        f"DCGM_FI_PROF_SM_ACTIVE{{{LABELS}}} 1.000000\nDCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 100\n"
    )

    assert (reading.sm_active_pct, reading.util_pct) == (100.0, 100.0)


# --- time --------------------------------------------------------------------------------------


def test_sample_timestamp_wins_over_scrape_time():
    reading = only_reading(f"DCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 5 1767000000500\n")

    assert reading.timestamp_ms == 1_767_000_000_500


def test_latest_sample_timestamp_of_a_gpu_is_the_readings_time():
    reading = only_reading(
        f"DCGM_FI_DEV_GPU_UTIL{{{LABELS}}} 5 1767000000500\n"
        f"DCGM_FI_DEV_GPU_TEMP{{{LABELS}}} 40 1767000000900\n"
        f"DCGM_FI_DEV_FB_USED{{{LABELS}}} 10\n"
    )

    assert reading.timestamp_ms == 1_767_000_000_900
