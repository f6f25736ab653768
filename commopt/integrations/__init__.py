"""Where commopt meets a training job: capturing a step (:mod:`.capture`) and applying
commopt's order inside ``torch.compile`` (:mod:`.inductor`)."""
