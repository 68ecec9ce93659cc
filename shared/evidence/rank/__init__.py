"""The ranking layer: fusion, rerankers, stages and profiles."""
