"""The OpenVINO model folder of a packaged GGUF (the ``openvino:`` backbone, jitlab/llm/openvino.py): written once to
``JITLAB_HOME/data/models/<stem>-openvino-<weights>/`` and read by every later process.

    folder = model_folder(embedded_gguf_path(), "f16")     # openvino_model.xml/.bin, openvino_(de)tokenizer.xml/.bin

How: the GGUF's Q4_1 tensors are de-quantized by gguf-py and written as ``weights`` (``f16``: the de-quantized
weights rounded to float16, near-exact; ``q8_0``: re-quantized to 8 bits in blocks of 32, as llama.cpp's quantizer
does); the other tensors (norms, the Q8_0 embedding) are copied. OpenVINO GenAI's own GGUF reader then builds the
model and saves it as OpenVINO IR with its tokenizer. The packaged file is not given to GenAI directly: its reader
turns Q4_1's float offsets into 4-bit zero points, which moved SmolLM2's likelihood choices on 6-8 of 24 recorded
score calls (benchmarks/README.md). ``scoring_model`` is the IR that ``score`` runs: the language-model head cut to
the last ``keep`` positions (an extra input; ``last_logits_model``), so a prompt pass computes one row of logits, not
one per token, and made stateless (``past.<i>`` inputs, ``present.<i>`` outputs for the keys/values): on a stateful
model OpenVINO's CPU plugin attends every new token with its one-token kernel once there is a past (SDPA's
``use_one_token``: ``L1 == 1 || (fuse_concat && L0 > 0)``), about twice the time of a fresh pass per token on top of a
300-token prefix, while the stateless model's multi-token kernel takes the past like any other keys.
"""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.paths import data_dir

__all__ = ["WEIGHTS", "last_logits_model", "model_folder", "scoring_model"]

WEIGHTS = ("f16", "q8_0")   # what the Q4_1 tensors become; the first is the default
_LOCK = threading.Lock()


def model_folder(gguf: Path, weights: str) -> Path:
    """The IR folder of ``gguf`` with its Q4_1 tensors as ``weights``, written on first use (about 10 s)."""
    folder = data_dir("models") / f"{gguf.stem}-openvino-{weights}"
    with _LOCK:
        if not (folder / "DONE").is_file():
            tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                _retype(gguf, tmp / "model.gguf", weights)
                import openvino_genai
                openvino_genai.LLMPipeline(str(tmp / "model.gguf"), "CPU", enable_save_ov_model=True)
                (tmp / "model.gguf").unlink()
                (tmp / "DONE").write_text(f"from {gguf}, Q4_1 tensors as {weights}, by jitlab.llm.openvino_model\n")
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(tmp, folder)
            except OSError as exc:
                raise ConfigError(f"openvino backbone: could not write {folder}: {exc}") from exc
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _retype(src: Path, dst: Path, weights: str) -> None:
    """A copy of GGUF ``src`` whose Q4_1 tensors are de-quantized and stored as ``weights``; all else copied."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize, quantize
    kinds = gguf.GGMLQuantizationType
    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for f in reader.fields.values():
        if f.name != "general.architecture" and not f.name.startswith("GGUF."):
            kind = f.types[0]
            writer.add_key_value(f.name, f.contents(), kind,
                                 sub_type=f.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for t in reader.tensors:
        if t.tensor_type == kinds.Q4_1:
            floats = dequantize(t.data, t.tensor_type)
            if weights == "f16":
                writer.add_tensor(t.name, floats.astype(np.float16))
            else:
                writer.add_tensor(t.name, quantize(floats, kinds.Q8_0), raw_dtype=kinds.Q8_0)
        elif t.tensor_type in (kinds.F32, kinds.F16):
            writer.add_tensor(t.name, t.data)
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def last_logits_model(xml: Path):
    """The IR at ``xml`` with an extra input ``keep`` (int64, shape [1]): logits only for the last ``keep``
    positions (a slice of the hidden states before the language-model head's MatMul)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops
    model = ov.Core().read_model(xml)
    head = model.output("logits").get_node()
    while head.get_type_name() != "MatMul":
        head = head.input_value(0).get_node()
    keep = ops.parameter([1], ov.Type.i64, name="keep")
    keep.output(0).get_tensor().set_names({"keep"})
    last = ops.slice(head.input_value(0), ops.negative(keep), np.array([np.iinfo(np.int64).max]), np.array([1]),
                     np.array([1]))
    head.input(0).replace_source_output(last.output(0))
    model.add_parameters([keep])
    model.validate_nodes_and_infer_types()
    return model


def scoring_model(xml: Path):
    """``last_logits_model(xml)`` without state: each variable's ReadValue becomes an input ``past.<i>`` (float32,
    [batch, kv heads, past tokens, head size]; ``beam_idx`` still picks each row's past) and its Assign an output
    ``present.<i>`` (the past plus this pass's tokens)."""
    import numpy as np
    import openvino.opset13 as ops
    model = last_logits_model(xml)
    reads = {op.get_variable_id(): op for op in model.get_ordered_ops() if op.get_type_name() == "ReadValue"}
    for i, assign in enumerate(model.get_sinks()):
        read = reads[assign.get_variable_id()]
        past = ops.parameter(read.get_output_partial_shape(0), read.get_output_element_type(0), name=f"past.{i}")
        past.output(0).get_tensor().set_names({f"past.{i}"})
        read.output(0).replace(past.output(0))
        present = ops.result(assign.input_value(0))
        present.output(0).get_tensor().set_names({f"present.{i}"})
        model.add_parameters([past])
        model.add_results([present])
        model.remove_sink(assign)
    for variable in list(model.get_variables()):
        model.remove_variable(variable)
    # GenAI's IR repeats the keys/values for grouped-query attention with a Broadcast to a target whose token count is
    # a constant 0 (the stateful SDPA fusion swallows it); unfused it must follow the input: a 1, broadcast both ways
    for op in model.get_ordered_ops():
        target = op.input_value(1).get_node() if op.get_type_name() == "Broadcast" else None
        if target is not None and target.get_type_name() == "Concat" and any(_is_zero(d) for d in target.input_values()):
            dims = [ops.constant(np.array([1], np.int64)).output(0) if _is_zero(d) else d
                    for d in target.input_values()]
            repeated = ops.broadcast(op.input_value(0), ops.concat(dims, 0), broadcast_spec="BIDIRECTIONAL")
            op.output(0).replace(repeated.output(0))
    model.validate_nodes_and_infer_types()
    return model


def _is_zero(value) -> bool:
    node = value.get_node()
    return node.get_type_name() == "Constant" and list(node.get_data()) == [0]
