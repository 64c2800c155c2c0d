// The h3engine Python module (pybind11): Engine (py_engine.h) and its Result. See the README's "Python"
// section.
#include "py_convert.h"
#include "py_engine.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using h3::python::Engine;
using h3::python::GenerateArgs;
using h3::python::GenerateResult;

PYBIND11_MODULE(h3engine, m) {
    m.doc() = "h3-engine: MiniMax-H3 video+audio generation (the Generator of the h3-engine binary)";
    m.attr("__version__") = H3_VERSION;
    h3::python::register_exceptions(m);

    py::class_<GenerateResult>(m, "Result", "What Engine.generate returns")
        .def_readonly("frames", &GenerateResult::frames, "uint8 [F, H, W, 3] RGB frames (None: not decoded)")
        .def_readonly("audio", &GenerateResult::audio, "float32 [2, N] stereo waveform (None: not decoded)")
        .def_readonly("sample_rate", &GenerateResult::sample_rate)
        .def_readonly("fps", &GenerateResult::fps)
        .def_readonly("width", &GenerateResult::width)
        .def_readonly("height", &GenerateResult::height)
        .def_readonly("num_frames", &GenerateResult::num_frames)
        .def_readonly("seed", &GenerateResult::seed, "the seed used (drawn when none was given)")
        .def_readonly("steps", &GenerateResult::steps)
        .def_readonly("task", &GenerateResult::task, "t2va | fl2va | ref2va")
        .def_readonly("written", &GenerateResult::written, "files written, in order")
        .def_readonly("metrics", &GenerateResult::metrics,
                      "stage seconds, work counters, peak device memory, component loads (as generate "
                      "--metrics)")
        .def("__repr__", [](const GenerateResult& r) {
            return "<h3engine.Result " + r.task + " " + std::to_string(r.width) + "x" +
                   std::to_string(r.height) + ", " + std::to_string(r.num_frames) + " frames, seed " +
                   std::to_string(r.seed) + ">";
        });

    py::class_<Engine>(
        m, "Engine",
        "A checkpoint opened for generation: Engine(checkpoint, **options) with the options of "
        "h3::EngineOptions (include/h3/engine.h) by name: device='cpu', dtype='bf16' "
        "(bf16|fp32|fp16), precision='bf16' (bf16|fp8), residency, resident_blocks, "
        "weight_dtype (bf16|int8|auto), host_pinning, gpu_memory_budget ('24GiB' or bytes), "
        "int8_cache, keep_loaded=True, keep_text_encoder=False, keep_dit_workspace=True, sp, tp, ring, "
        "gpus=[...], "
        "lora=[path | (path, scale) | {'path', 'scale'}], lora_mode ('runtime'|'merged'), "
        "lora_dir, lora_strict, lora_qkv_rows, attention, max_steps, reference_image_edge, "
        "reference_video_edge. Errors: ValueError with .field naming the option.")
        .def(py::init([](const py::object& checkpoint, const py::kwargs& options) {
                 return std::make_unique<Engine>(h3::python::engine_options(checkpoint, options));
             }),
             py::arg("checkpoint"))
        .def(
            "generate",
            [](Engine& e, py::object prompt, py::object prompt_embeds, py::object random_prompt_embeds,
               py::object task, py::object size, py::object aspect, py::object seconds, py::object frames,
               py::object num_inference_steps, py::object steps, py::object seed, py::object cache,
               py::object quality, py::object attention, py::object first_frame, py::object last_frame,
               py::object reference, py::object references, py::object lora, py::object lora_strict,
               py::object preset, py::object video_shift, py::object audio_shift, py::object output,
               py::object save_latents, bool return_media, py::object progress) {
                return e.generate(GenerateArgs{.prompt = prompt,
                                               .prompt_embeds = prompt_embeds,
                                               .random_prompt_embeds = random_prompt_embeds,
                                               .task = task,
                                               .size = size,
                                               .aspect = aspect,
                                               .seconds = seconds,
                                               .frames = frames,
                                               .num_inference_steps = num_inference_steps,
                                               .steps = steps,
                                               .seed = seed,
                                               .cache = cache,
                                               .quality = quality,
                                               .attention = attention,
                                               .first_frame = first_frame,
                                               .last_frame = last_frame,
                                               .reference = reference,
                                               .references = references,
                                               .lora = lora,
                                               .lora_strict = lora_strict,
                                               .preset = preset,
                                               .video_shift = video_shift,
                                               .audio_shift = audio_shift,
                                               .output = output,
                                               .save_latents = save_latents,
                                               .return_media = return_media,
                                               .progress = progress});
            },
            py::kw_only(), py::arg("prompt") = py::none(), py::arg("prompt_embeds") = py::none(),
            py::arg("random_prompt_embeds") = py::none(), py::arg("task") = py::none(),
            py::arg("size") = py::none(), py::arg("aspect") = py::none(), py::arg("seconds") = py::none(),
            py::arg("frames") = py::none(), py::arg("num_inference_steps") = py::none(),
            py::arg("steps") = py::none(), py::arg("seed") = py::none(), py::arg("cache") = py::none(),
            py::arg("quality") = py::none(), py::arg("attention") = py::none(),
            py::arg("first_frame") = py::none(), py::arg("last_frame") = py::none(),
            py::arg("reference") = py::none(), py::arg("references") = py::none(),
            py::arg("lora") = py::none(), py::arg("lora_strict") = py::none(), py::arg("preset") = py::none(),
            py::arg("video_shift") = py::none(), py::arg("audio_shift") = py::none(),
            py::arg("output") = py::none(), py::arg("save_latents") = py::none(),
            py::arg("return_media") = true, py::arg("progress") = py::none(),
            "Generate one video+audio clip. Keywords are the HTTP API's fields (size='WxH', seconds, frames, "
            "num_inference_steps — or steps —, seed, cache, quality, attention, first_frame / last_frame: a "
            "path or a uint8 [H, W, 3] array, reference: ['image:a.png', 'clip.mp4', ...], lora: "
            "[{'path': p, 'scale': s}], preset, video_shift, audio_shift); output='x.mp4' writes a file; "
            "progress(dict) is called per stage and step. Releases the GIL; Ctrl-C or Engine.cancel() "
            "cancels (h3engine.Cancelled / KeyboardInterrupt). Errors: ValueError (with .field), "
            "FileNotFoundError, RuntimeError.")
        .def(
            "warm_up",
            [](Engine& e, const py::kwargs& fields) { return e.warm_up(h3::python::generate_args(fields)); },
            "Run the one-time work of the job generate(**fields) would run, once: its conditioning, the DiT "
            "forwards that time new GEMM shapes and size the kept workspace, and the decode (unless "
            "return_media=False with save_latents only); nothing is written. The next such generate()'s "
            "first "
            "step then costs what its others do. Returns {'seconds', 'encode_seconds', 'step_seconds', "
            "'metrics'}. Releases the GIL; Engine.cancel() stops it.")
        .def("cancel", &Engine::cancel, "Cancel the running generate() (callable from any thread)")
        .def_property_readonly("busy", &Engine::busy)
        .def_property_readonly("checkpoint", [](const Engine& e) { return e.info().root; })
        .def_property_readonly("device", [](const Engine& e) { return e.info().device; })
        .def_property_readonly("dtype", [](const Engine& e) { return e.info().dtype; })
        .def_property_readonly("placement", &Engine::placement,
                               "the weights' placement (the budget planner's text when it chose)")
        .def_property_readonly("component_loads", &Engine::component_loads);
}
