"""Resources per job, needs per case, and how cases are grouped into pools."""

from types import SimpleNamespace

import pytest

from accelml.cases import Case, DatasetSpec
from accelml.errors import SpecError
from accelml.executors.jobqueue import plan_pools
from accelml.executors.resources import (
    CaseNeeds,
    Resources,
    check_worker_fits,
    parse_memory,
    parse_walltime,
)
from accelml.runner.process import CaseTask


def test_sizes_and_walltimes_parse_and_bad_ones_name_the_key():
    assert parse_memory("512M") == 512 * 2**20
    assert parse_memory("1.5GiB") == int(1.5 * 2**30)
    assert parse_walltime("02:00:00") == 7200
    with pytest.raises(SpecError, match="resources.memory = 'lots'"):
        Resources.from_mapping({"memory": "lots"})
    with pytest.raises(SpecError, match="resources.walltime = '90 minutes'"):
        Resources.from_mapping({"walltime": "90 minutes"})
    with pytest.raises(SpecError, match="resources.ngpus: unknown resource; allowed:.*queue"):
        Resources.from_mapping({"ngpus": 1})
    with pytest.raises(SpecError, match="gpus = -1"):
        Resources.from_mapping({"gpus": -1})


def test_queue_is_partition_and_lists_stay_lists():
    resources = Resources.from_mapping({"queue": "workq", "prologue": "module load Python",
                                        "gpu-type": "a100"})
    assert resources.partition == "workq"
    assert resources.prologue == ("module load Python",)
    assert resources.gpu_type == "a100"
    with pytest.raises(SpecError, match="one list item per line"):
        Resources.from_mapping({"prologue": ["module load a\nmodule load b"]})


def test_needs_read_off_the_runner_task():
    data = DatasetSpec("d", "generated")
    horovod = CaseTask(case=Case("mlp", "keras", "cuda", data, ranks=4, strategy="horovod",
                                 time_limit_s=60.0), run_id="r", threads=2)
    assert CaseNeeds.of_case(horovod) == CaseNeeds(cores=2, gpus=4, ranks=4, seconds=60.0)
    mirrored = CaseTask(case=Case("mlp", "keras", "cuda", data, ranks=2, strategy="mirrored"),
                        run_id="r")
    assert CaseNeeds.of_case(mirrored) == CaseNeeds(cores=1, gpus=2, ranks=1, seconds=600.0)
    cpu = CaseTask(case=Case("kmeans", "sklearn", "cpu", data, memory_limit_mb=4096), run_id="r")
    assert CaseNeeds.of_case(cpu).memory_bytes == 4096 * 2**20


def test_a_job_is_widened_to_what_its_case_needs_never_narrowed():
    base = Resources(cores=4, memory="1GiB", walltime="00:05:00")
    job = base.for_case(CaseNeeds(cores=2, gpus=2, ranks=2, memory_bytes=3 * 2**30, seconds=3600))
    assert (job.cores, job.gpus, job.ranks) == (4, 2, 2)
    assert job.memory_bytes == 3 * 2**30
    assert job.walltime_seconds >= 3600
    assert base.for_case(CaseNeeds()).walltime == "00:05:00"


def test_worker_resources_route_gpu_cases_only_to_gpu_workers():
    base = Resources()
    gpu_job = base.for_case(CaseNeeds(gpus=2, ranks=2))
    cpu_job = base.for_case(CaseNeeds())
    assert gpu_job.pool_tag != cpu_job.pool_tag
    # a GPU case asks for its own pool's tag, which a CPU worker does not have
    assert gpu_job.pool_tag not in cpu_job.worker_resources()
    assert check_worker_fits(CaseNeeds(gpus=2), cpu_job.worker_resources()) == \
        "needs 2 GPU(s), the worker has 0"
    assert check_worker_fits(CaseNeeds(gpus=2, ranks=2), gpu_job.worker_resources()) is None


def test_jobs_are_shared_among_pools_at_least_one_each_never_more_than_cases():
    needs = [CaseNeeds()] * 6 + [CaseNeeds(gpus=1)] * 2 + [CaseNeeds(cores=8)]
    plan = plan_pools(needs, Resources(), jobs=5)
    by_size = {len(indices): jobs for _, jobs, indices in plan}
    assert by_size == {6: 3, 2: 1, 1: 1}
    assert sum(jobs for _, jobs, _ in plan_pools(needs, Resources(), jobs=100)) == len(needs)
    assert [jobs for _, jobs, _ in plan_pools(needs, Resources(), jobs=1)] == [1, 1, 1]
    # default: one job per case, at most 4
    assert sum(jobs for _, jobs, _ in plan_pools([CaseNeeds()] * 9, Resources(), None)) == 4


def test_case_objects_from_the_spec_give_the_same_needs_as_tasks():
    spec_case = SimpleNamespace(device="cuda", ranks=2, strategy="multiworker", threads=None,
                                memory_limit_mb=None, time_limit_s=None)
    assert CaseNeeds.of_case(spec_case) == CaseNeeds(gpus=2, ranks=2)


def test_gpus_setting_sizes_gpu_jobs_only():
    base = Resources(gpus=4)
    assert base.for_case(CaseNeeds()).gpus == 0                    # CPU cases never get GPUs
    assert base.for_case(CaseNeeds(gpus=1)).gpus == 4              # a whole 4-GPU node
    assert Resources().for_case(CaseNeeds(gpus=2, ranks=2)).gpus == 2
