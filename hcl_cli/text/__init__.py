"""Sentences: the third modality (quick-thought vectors, Logeswaran & Lee, ICLR 2018), read out on SentEval's tasks."""
