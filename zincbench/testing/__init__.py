"""Real test material built on the fly: tiny GGUF models that llama.cpp loads and runs on a CPU."""
