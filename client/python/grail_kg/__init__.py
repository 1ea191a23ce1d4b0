"""grail_kg: a Python client for grail-server (kg.v1.KnowledgeGraph over gRPC).

    from grail_kg import Client
    with Client("localhost:50051") as kg:
        kg.add_triples([("alice", "knows", "bob")])
        print(kg.score("alice", "knows", "bob").score)
        for entry in kg.rank_tails("alice", "knows", top_k=10).ranked:
            print(entry.rank, entry.entity, entry.score)

Errors are GrailError, carrying the gRPC status code and the server's message.
The generated stubs (kg/v1/knowledge_graph_pb2*.py) are made from proto/ at build time
into build/python/, beside a copy of this package: PYTHONPATH=build/python.
"""

from grail_kg.client import (AddAck, Client, ExplanationPath, ExportPage, GrailError, PathStep,
                             RankedEntity, Ranking, RemoveAck, Score, Session)

__all__ = ["AddAck", "Client", "ExplanationPath", "ExportPage", "GrailError", "PathStep",
           "RankedEntity", "Ranking", "RemoveAck", "Score", "Session"]

__version__ = "0.1.0"
