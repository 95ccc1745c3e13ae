"""Reading what a model returns: the Analysis record of one text (record, analyze, the worker that serves them),
and the analyses over it and over the weights: rollout, induction scores, ablation, composition, the Lesson's
computations, trace files out and in. Runs models only through inference/ and model.forward."""
