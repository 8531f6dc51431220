"""A transformer's checkpoint as DLIO writes it (jobs/checkpoint_layout.py): the parameter count and
bytes of MLPerf Storage v2.0's four llama3 models against values worked out by hand from DLIO's
formulas, which ranks write which files under each ZeRO stage, a world-size change, the DLIO
`model:` section translated and run scaled down, and the built-ins sized by the same rules."""
from __future__ import annotations

import pytest
from storlab.jobs.checkpoint_layout import (
    TransformerSpec,
    checkpoint_sizes,
    default_world,
    num_parameters,
    rank_files,
)
from storlab.jobs.dlio.translator import translate_text
from storlab.jobs.translation import Refusal
from storlab.jobs.workload import WorkloadError, spec_from_table
from storlab.jobs.workload_job import builtin_table as _builtin_table
from storlab.suites.training.workload import run_workload

GIB = 1 << 30


def llama(layers, hidden, ffn, heads, kv_heads, tp, pp, zero):
    return TransformerSpec(num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn, num_attention_heads=heads,
                           num_kv_heads=kv_heads, vocab_size=128256, tensor_parallelism=tp, pipeline_parallelism=pp,
                           zero_stage=zero)


# (shape, CLOSED world, parameters, model bytes, optimizer bytes). By hand, llama3-8b (h 4096, kv
# 4096 / 32 x 8 = 1024, ffn 14336): embedding = lm_head = 128256 x 4096 = 525,336,576; a layer =
# 4096 + 4096 x 6144 + 4096^2 + 4096 + 3 x 14336 x 4096 = 218,112,000; 2 x 525,336,576 + 32 x
# 218,112,000 + 4096 = 8,030,261,248. ZeRO 3 over DP 8 divides every tensor evenly: model = 2 B x
# parameters; optimizer = 8 ranks x 3 x (8,030,261,248 / 8 + 5 x 4096) x 4 B.
# llama3-70b: a layer = 8192 + 8192 x 9216 + 8192^2 + 8192 + 3 x 28672 x 8192 = 847,265,792;
# 2 x 1,050,673,152 + 80 x 847,265,792 + 8192 = 69,882,617,856; TP 8 x DP 8 divide every matrix
# evenly, but the 2 x 80 + 1 norms (h each) are divided by DP only: each TP rank holds them whole.
# llama3-405b: a layer = 16384 + 16384 x 18432 + 16384^2 + 16384 + 3 x 53248 x 16384 = 3,187,703,808;
# 2 x 2,101,346,304 + 126 x 3,187,703,808 + 16384 = 405,853,388,800. ZeRO 1, PP 32: DP rank 0's 8 TP
# ranks write every layer once, norms (h) whole on each TP rank: model = 2 B x 8 x (126 x 398,491,648
# + 2 x 262,668,288 + 16384); optimizer = 512 x 3 x (405,853,388,800 // 512 + 5 x 16384) x 4 B.
# llama3-1t: head 25872 // 192 = 134, kv 134 x 32 = 4288; a layer = 25872 + 25872 x 34448 + 25872^2
# + 25872 + 3 x 98304 x 25872 = 9,190,614,048; 2 x 3,318,239,232 + 128 x 9,190,614,048 + 25872.
# ZeRO 1, TP 8, PP 64: a layer on one TP rank = 2 x 25872 + (891,238,656 + 669,360,384 + 5,086,543,872
# + 2,543,271,936) / 8 = 1,148,872,032; the embedding / 8 = 414,779,904.
P_1T = 2 * 3_318_239_232 + 128 * 9_190_614_048 + 25872
MODELS = {
    "llama3_8b": (llama(32, 4096, 14336, 32, 8, 1, 1, 3), 8, 8_030_261_248,
                  2 * 8_030_261_248, 8 * 3 * (8_030_261_248 // 8 + 5 * 4096) * 4),
    "llama3_70b": (llama(80, 8192, 28672, 128, 8, 8, 1, 3), 64, 69_882_617_856,
                   2 * (69_882_617_856 + 7 * 161 * 8192), 64 * 3 * (69_882_617_856 // 64 + 5 * 8192) * 4),
    "llama3_405b": (llama(126, 16384, 53248, 128, 8, 8, 32, 1), 512, 405_853_388_800,
                    2 * 8 * (126 * 398_491_648 + 2 * 262_668_288 + 16384),
                    512 * 3 * (405_853_388_800 // 512 + 5 * 16384) * 4),
    "llama3_1t": (llama(128, 25872, 98304, 192, 32, 8, 64, 1), 1024, P_1T,
                  2 * 8 * (128 * 1_148_872_032 + 2 * 414_779_904 + 25872), 1024 * 3 * (P_1T // 1024 + 5 * 25872) * 4),
}


@pytest.mark.parametrize("name", MODELS)
def test_mlperf_llama3_parameters_and_bytes(name):
    t, world, params, model, optimizer = MODELS[name]
    assert num_parameters(t) == params
    s = checkpoint_sizes(t, world)
    assert s["model_bytes"] == model
    assert s["optimizer_bytes"] == optimizer
    assert s["total_bytes"] == s["model_bytes"] + s["optimizer_bytes"]
    # the same checkpoint summed rank by rank
    assert sum(b for r in range(world) for _, b in rank_files(t, r, world)) == s["total_bytes"]


def test_published_sizes_are_gib():
    """mlpstorage's (15, 90) and (130, 781) "GB" for llama3-8b and -70b are DLIO's GiB, not 10^9 B."""
    s8 = checkpoint_sizes(MODELS["llama3_8b"][0], 8)
    assert (round(s8["model_gib"]), round(s8["optimizer_gib"])) == (15, 90)
    assert s8["model_bytes"] == 16_060_522_496 and s8["optimizer_bytes"] == 96_365_101_056
    s70 = checkpoint_sizes(MODELS["llama3_70b"][0], 64)
    assert (round(s70["model_gib"]), round(s70["optimizer_gib"])) == (130, 781)


def test_zero1_with_pipeline_writes_layer_files_on_data_parallel_rank_0_only():
    t = llama(4, 64, 128, 8, 8, 2, 2, 1)          # TP 2 x PP 2, world 8: DP 2
    files = {r: rank_files(t, r, 8) for r in range(8)}
    # stage 0 (ranks 0, 1): embedding + layers 1-2; stage 1 (ranks 2, 3): layers 3-4, lm_head, final norm
    assert [n for n, _ in files[0]] == ["layer_0-model_0_model_states", "layer_1-model_0_model_states",
                                        "layer_2-model_0_model_states", "zero_pp_rank_0_mp_rank_0_optim_states"]
    assert [n for n, _ in files[3]][:4] == ["layer_3-model_3_model_states", "layer_4-model_3_model_states",
                                            "layer_5-model_3_model_states", "layer_6-model_3_model_states"]
    for r in range(4, 8):                      # DP rank 1: its optimizer shard only
        assert [n for n, _ in files[r]] == [f"zero_pp_rank_1_mp_rank_{r - 4}_optim_states"]
    # embedding on one TP rank: 64 x 128256 / 2 elements of fp16
    assert files[0][0][1] == 64 * 128256 // 2 * 2
    # optimizer: [n, 5h] x 3 fp32 with n = parameters / 8
    assert files[5][0][1] == 3 * (num_parameters(t) // 8 + 5 * 64) * 4
    # no pipeline: one file of all the layers
    flat = llama(4, 64, 128, 8, 8, 2, 1, 1)
    assert [n for n, _ in rank_files(flat, 1, 4)] == ["model_1_model_states", "zero_pp_rank_0_mp_rank_1_optim_states"]


def test_zero3_shards_the_model_over_data_parallel_ranks():
    t = llama(4, 64, 128, 8, 8, 2, 1, 3)          # TP 2, world 8: DP 4
    files = {r: rank_files(t, r, 8) for r in range(8)}
    assert all(len(f) == 2 for f in files.values())
    assert files[6][0][0] == "zero_pp_rank_3_mp_rank_0_model_states"
    model_dp4 = files[0][0][1]
    one = rank_files(t, 0, 2)[0][1]             # the same TP rank with DP 1 holds 4 x as much
    assert one == 4 * model_dp4
    with pytest.raises(WorkloadError, match="zero_stage: 3 is not allowed with pipeline_parallelism 2"):
        spec_from_table({"workload": {"train": False}, "checkpoint": {
            "enabled": True, "transformer": {"num_layers": 4, "pipeline_parallelism": 2, "zero_stage": 3}}})


def test_no_zero_writes_from_the_first_model_parallel_group_only():
    t = llama(4, 64, 128, 8, 8, 2, 1, 0)
    s = checkpoint_sizes(t, 8)
    assert s["writers"] == 2 and [len(rank_files(t, r, 8)) for r in range(8)] == [2, 2, 0, 0, 0, 0, 0, 0]
    assert rank_files(t, 0, 8)[1][1] == 3 * (num_parameters(t) // 2 + 5 * 64) * 4


LLAMA_YAML = """model:
  name: llama_8b
  type: transformer
  num_layers: 32
  model_datatype: fp16
  optimizer_datatype: fp32
  parallelism:
    pipeline: 1
    tensor: 1
    zero_stage: 3
  transformer:
    vocab_size: 128256
    hidden_size: 4096
    ffn_hidden_size: 14336
    num_attention_heads: 32
    num_kv_heads: 8
framework: pytorch
workflow:
  generate_data: False
  train: False
  checkpoint: True
checkpoint:
  checkpoint_folder: checkpoints/llama_8b
  time_between_checkpoints: 5
  num_checkpoints_write: 10
  num_checkpoints_read: 10
  fsync: True
"""


def test_dlio_model_section_translates_with_its_sizes_recorded():
    t = translate_text(LLAMA_YAML, "llama3_8b.yaml", "0" * 64)
    ck = t.job["checkpoint"]
    assert ck["transformer"]["num_layers"] == 32 and ck["transformer"]["zero_stage"] == 3
    assert ck["ranks_total"] == 8 and ck["ranks"] == "all" and ck["count_write"] == 10
    by = {m.key: m for m in t.mapped}
    assert by["model.parallelism.zero_stage"].line == 10
    assert "8030261248 parameters" in by["model.num_layers"].note and "model 16060522496 B" in by["model.num_layers"].note
    note = next(n for n in t.notes if n.startswith("checkpoint of a "))
    assert "Model size 14.957527 GB" in note and "Optimizer state size 89.746994 GB" in note
    assert "Total checkpoint size 104.704521 GB" in note
    assert by["checkpoint.time_between_checkpoints"].how == "accepted"
    # the built-in llama3_8b is the same checkpoint (one source of the numbers)
    builtin = spec_from_table(_builtin_table("llama3_8b")).checkpoint
    mine = t.resolve().checkpoint
    assert builtin.transformer == mine.transformer and builtin.ranks_total == mine.ranks_total
    assert all(builtin.rank_file_bytes(r, 8) == mine.rank_file_bytes(r, 8) == [2_007_565_312, 12_045_637_632]
               for r in range(8))


def test_default_world_and_its_override(tmp_path, capsys):
    assert default_world(llama(32, 4096, 14336, 32, 8, 1, 1, 3)) == 8
    assert default_world(llama(126, 16384, 53248, 128, 8, 8, 32, 1)) == 256
    assert default_world(llama(80, 8192, 28672, 128, 8, 8, 1, 3)) == 8
    path = tmp_path / "llama3_8b.yaml"
    path.write_text(LLAMA_YAML)
    from storlab.cli.main import main

    assert main(["workload", str(path), "--set", "checkpoint.ranks_total=16", "--emit", "-"]) == 0
    out = capsys.readouterr().out
    assert "ranks_total = 16" in out and "over 16 ranks (TP 1 x PP 1 x DP 16, ZeRO 3)" in out
    spec = spec_from_table({**translate_text(LLAMA_YAML, "x.yaml").job})
    spec.checkpoint.ranks_total = 16
    assert spec.checkpoint.rank_file_bytes(0, 1) == [16_060_522_496 // 16, 3 * (8_030_261_248 // 16 + 5 * 4096) * 4]
    # mlpstorage's subset mode: ++workload.model.parallelism.data=D makes the world D x TP x PP
    t = translate_text(LLAMA_YAML.replace("tensor: 1", "tensor: 2"), "x.yaml",
                       overrides=["++workload.model.parallelism.data=4", "++workload.checkpoint.mode=subset"])
    assert t.job["checkpoint"]["ranks_total"] == 8 and "over 8 ranks (TP 2 x PP 1 x DP 4" in t.notes[0]
    path.write_text(LLAMA_YAML.replace("tensor: 1", "tensor: 2"))
    assert main(["workload", str(path), "--set", "checkpoint.ranks_total=7", "--emit", "-"]) == 2
    assert "checkpoint.ranks_total: 7 is not allowed; use a multiple of tensor x pipeline parallelism = 2" \
        in capsys.readouterr().err


def test_dlio_model_section_refusals():
    bad = LLAMA_YAML.replace("    pipeline: 1\n", "    pipeline: 2\n")
    with pytest.raises(Refusal, match=r"llama3_8b.yaml:10: model.parallelism.zero_stage = 3: .*pipeline"):
        translate_text(bad, "llama3_8b.yaml")
    with pytest.raises(Refusal, match=r"model.num_layers = 32: .*model.type: transformer"):
        translate_text(LLAMA_YAML.replace("type: transformer", "type: cnn"), "x.yaml")
    with pytest.raises(Refusal, match=r"model.transformer.num_kv_heads = 0: .*> 0"):
        translate_text(LLAMA_YAML.replace("num_kv_heads: 8", "num_kv_heads: 0"), "x.yaml")


def test_scaled_checkpoint_run_writes_dlio_bytes_times_the_scale(tmp_path):
    t = translate_text(LLAMA_YAML.replace("zero_stage: 3", "zero_stage: 1").replace("tensor: 1", "tensor: 2"),
                       "x.yaml")
    table = t.job
    table["checkpoint"].update(folder=str(tmp_path / "ck"), count_write=1, count_read=1, scale=1e-5)
    table["workload"]["accelerators"] = 3                 # ranks 0-2 of a world of 8 (TP 2, DP 4)
    spec = spec_from_table(table)
    doc = run_workload(spec, argv=["test"], translation=t.record())
    tf = llama(32, 4096, 14336, 32, 8, 2, 1, 1)
    expected = sum(max(1, round(b * 1e-5)) for r in range(3) for _, b in rank_files(tf, r, 8))
    write, read = doc["checkpoints"]
    assert write["bytes"] == read["bytes"] == expected and write["writers"] == 3
    ck = doc["checkpoint"]
    assert ck["subset"] and ck["transformer"]["world"] == 8 and ck["transformer"]["data"] == 4
    assert ck["fraction_written"] == pytest.approx(expected / (ck["transformer"]["total_bytes"] * 1e-5))
    assert list((tmp_path / "ck").iterdir()) == []
    from storlab.schemas import validate

    validate(doc)
    # ranks_total 0: the world is the run's writers (DLIO's default mode), whole TP groups only
    table["checkpoint"]["ranks_total"] = 0
    with pytest.raises(WorkloadError, match="checkpoint.ranks_total: 0 makes the world this run's 3 writer"):
        run_workload(spec_from_table(table), argv=["test"])
    assert list((tmp_path / "ck").iterdir()) == []


DATAGEN_YAML = """model:
  name: tiny
  type: cnn
framework: pytorch
workflow:
  generate_data: True
  train: False
  checkpoint: False
dataset:
  data_folder: {folder}
  format: npz
  num_files_train: 3
  num_samples_per_file: 2
  record_length_bytes: 4096
"""


def test_generate_only_workflow_generates_and_reports(tmp_path):
    t = translate_text(DATAGEN_YAML.format(folder=tmp_path / "data"), "datagen.yaml")
    spec = t.resolve()
    assert spec.mode == "generate" and t.job["workload"]["generate"] is True
    doc = run_workload(spec, argv=["test"], translation=t.record())
    gen = doc["generation"]
    assert gen["generated"] and gen["files"] == 3 and gen["bytes"] == doc["dataset"]["bytes"] >= 3 * 2 * 4096
    assert gen["seconds"] > 0 and gen["mib_per_s"] > 0 and doc["complete"] and "au" not in doc
    assert len([p for p in (tmp_path / "data").rglob("*.npz")]) == 3
    from storlab.schemas import validate

    validate(doc)
    again = run_workload(spec, argv=["test"])            # a complete dataset is reused: nothing written
    assert again["generation"]["generated"] is False and again["generation"]["bytes"] == 0


def test_a_workflow_that_does_nothing_is_refused_in_one_line():
    text = DATAGEN_YAML.format(folder="d").replace("generate_data: True", "generate_data: False")
    with pytest.raises(Refusal) as info:
        translate_text(text, "nothing.yaml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("dlio nothing.yaml:7: workflow.train = false") and "nothing runs" in msg
    with pytest.raises(WorkloadError, match="workload.train: false runs nothing"):
        spec_from_table({"workload": {"train": False}})
