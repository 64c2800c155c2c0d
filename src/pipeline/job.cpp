#include "pipeline/job.h"

namespace h3::pipeline {

const char* task_name(Task t) {
    switch (t) {
    case Task::kT2va:
        return "t2va";
    case Task::kFl2va:
        return "fl2va";
    case Task::kRef2va:
        return "ref2va";
    }
    return "unknown";
}

Result<Task> parse_task(const std::string& name) {
    for (Task t : {Task::kT2va, Task::kFl2va, Task::kRef2va})
        if (name == task_name(t)) return t;
    return invalid_argument("task must be t2va, fl2va or ref2va, got '" + name + "'");
}

bool GenerationJob::presents_images() const {
    if (!prompt_embeds && random_prompt_rows == 0 && keyframes && !keyframes->images.empty()) return true;
    if (references)
        for (const NormalizedReference& r : *references)
            if (r.kind != ReferenceKind::kAudio) return true;
    return false;
}

} // namespace h3::pipeline
