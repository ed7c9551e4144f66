"""The pure model: what a question and a memory's shape are, Beta links and their posteriors,
co-use edges, retention and exploration. Plain functions and values over numpy arrays; nothing
here reads or writes a state, so every layer above (scoring, state, learning, the facade) may
use it."""
