"""The client: one gRPC channel, plaintext or TLS, with an optional bearer token."""

import os
import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import grpc

from kg.v1 import knowledge_graph_pb2 as pb
from kg.v1 import knowledge_graph_pb2_grpc as pb_grpc

__all__ = ["AddAck", "Client", "ExplanationPath", "ExportPage", "GrailError", "PathStep",
           "RankedEntity", "Ranking", "RemoveAck", "Score"]

Triple = Tuple[str, str, str]


class GrailError(Exception):
    """A call that failed: `code` is a grpc.StatusCode, `message` the server's words."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PathStep:
    """One edge of an explanation path; inverse: the fact is to_entity -relation-> from_entity."""
    from_entity: str
    relation: str
    to_entity: str
    inverse: bool
    attention: Tuple[float, ...]  # the model's attention on the edge, per layer


@dataclass(frozen=True)
class ExplanationPath:
    """A head-to-tail path behind a score, as a rule body ("r1(h,z1) ∧ r2^-1(z1,t)"); weight is
    the product over layers of the product of the path's edge attentions (see the proto)."""
    rule: str
    weight: float
    layer_weights: Tuple[float, ...]
    steps: Tuple[PathStep, ...]


@dataclass(frozen=True)
class Score:
    head: str
    relation: str
    tail: str
    score: float
    probability: float
    known_fact: bool
    subgraph_nodes: int
    subgraph_edges: int
    graph_sequence: int
    model_version: str = ""
    paths: Tuple[ExplanationPath, ...] = ()  # with score(..., explain=True)
    # The scorer: "grail", "path", "fused" (a fusion archive's classifier over GraIL's and
    # its KGE models' scores; its facts with an entity the KGE models lack are "grail") or
    # "ensemble" (an ensemble archive's rule over its path-family members' scores).
    scored_by: str = ""
    # A path-family score from a propagation pruned to the server's budget: approximate.
    pruned: bool = False


@dataclass(frozen=True)
class RankedEntity:
    rank: int
    entity: str
    score: float
    known_fact: bool
    scored_by: str = ""  # as Score.scored_by
    # A pruned propagation did not visit it: its score is the far score, not its own.
    pruned: bool = False


@dataclass(frozen=True)
class Ranking:
    ranked: List[RankedEntity]
    candidates_scored: int
    candidates_filtered: int
    candidates_shared_score: int
    graph_sequence: int
    # Candidates a pruned propagation did not visit (each flagged RankedEntity.pruned); 0: exact.
    candidates_pruned: int = 0


@dataclass(frozen=True)
class AddAck:
    """One acknowledged AddTriples chunk: stored durably before it is acknowledged."""
    sequence: int
    chunk_index: int
    facts_added: int
    duplicate_facts: int
    entities_created: int
    relations_created: int
    facts_sent: int = field(default=0)


@dataclass(frozen=True)
class RemoveAck:
    """One acknowledged RemoveTriples chunk: removed durably before it is acknowledged."""
    sequence: int
    chunk_index: int
    facts_removed: int
    facts_not_present: int
    facts_sent: int = field(default=0)
    entities_removed: int = field(default=0)
    entities_not_present: int = field(default=0)
    relations_removed: int = field(default=0)
    relations_not_present: int = field(default=0)


@dataclass
class ExportPage:
    """One message of ExportTriples: facts in order of addition, each with the sequence of
    the chunk that added it, from the version graph_sequence."""
    graph_sequence: int
    triples: List[Triple] = field(default_factory=list)
    sequences: List[int] = field(default_factory=list)


def _read(path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer TOKEN` to every call. An interceptor rather than call
    credentials, which gRPC sends over TLS only: a token on a plaintext loopback channel
    works too, as with grail-client."""

    def __init__(self, token: str):
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details):
        metadata = list(details.metadata or []) + [self._header]
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else \
            _CallDetails(details.method, details.timeout, metadata, details.credentials,
                         details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._with_token(details), request_iterator)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = (credentials, wait_for_ready,
                                                                   compression)


class Session:
    """The graph version reads must see: the highest sequence acknowledged to any client that
    shares this session (AddTriples, RemoveTriples). Reads send it as min_graph_sequence, so a
    replica that has not applied that far yet waits for it (or fails UNAVAILABLE after its
    deadline): a process reads its own writes whichever replica answers. Each Client has its
    own session unless given one to share (e.g. one client per replica)."""

    def __init__(self, sequence: int = 0):
        self._lock = threading.Lock()
        self._sequence = sequence

    @property
    def sequence(self) -> int:
        with self._lock:
            return self._sequence

    def saw(self, sequence: int) -> None:
        """Raises the session's sequence to `sequence` (never lowers it)."""
        with self._lock:
            self._sequence = max(self._sequence, int(sequence))


class Client:
    """A connection to grail-server.

    target: "HOST:PORT". tls_ca: a PEM CA bundle file, which turns TLS on; tls_cert and
    tls_key: a client certificate for mutual TLS; tls_server_name: the name the server's
    certificate must carry when it is not the target's host. token: a bearer token sent
    with every call (default: the environment's GRAIL_TOKEN). timeout: seconds per call
    (None: no deadline). session: the Session whose sequence reads ask for (default: a new
    one, raised by this client's own acks).
    """

    def __init__(self, target: str, *, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = 30.0, session: Optional[Session] = None):
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if tls_cert is not None and tls_ca is None:
            raise ValueError("tls_cert needs tls_ca (the server's CA)")
        # Rankings of every entity can exceed gRPC's default 4 MiB.
        options = [("grpc.max_receive_message_length", -1)]
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca), private_key=_read(tls_key),
                certificate_chain=_read(tls_cert))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            channel = grpc.secure_channel(target, credentials, options=options)
        else:
            channel = grpc.insecure_channel(target, options=options)
        self._channel = channel
        token = token if token is not None else os.environ.get("GRAIL_TOKEN")
        if token:
            channel = grpc.intercept_channel(channel, _BearerToken(token))
        self._stub = pb_grpc.KnowledgeGraphStub(channel)
        self._health = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=lambda _: b"",
            response_deserializer=lambda data: data)
        self.timeout = timeout
        self.session = session if session is not None else Session()

    # --- lifecycle ---
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise GrailError(e.code(), e.details() or "") from None

    # --- calls ---
    def score(self, head: str, relation: str, tail: str, *, explain: bool = False,
              max_paths: int = 0, max_staleness_sequences: int = 0,
              max_staleness_ms: int = 0) -> Score:
        """ScoreTriplet: how likely (head, relation, tail) is. With explain, Score.paths holds
        the strongest head-to-tail paths behind it (max_paths of them; 0: the server's 3).
        max_staleness_sequences / max_staleness_ms: accept a path-family score computed on a
        graph version up to that many versions behind / that old (kg.v1.Staleness; 0: exact);
        Score.graph_sequence says which version it came from."""
        response = self._call(self._stub.ScoreTriplet, pb.ScoreTripletRequest(
            triple=pb.Triple(head=head, relation=relation, tail=tail), explain=explain,
            max_paths=max_paths, min_graph_sequence=self.session.sequence,
            max_staleness=pb.Staleness(max_sequences=max_staleness_sequences,
                                       max_milliseconds=max_staleness_ms)))
        return _score((head, relation, tail), response)

    def reload_model(self, path: str = "") -> dict:
        """ReloadModel (admin scope): the server serves the archive at `path` (a path on its
        machine; "": its --model file again) from now on. Returns the new model's version and
        generation, the previous version, and the load and warm-up seconds."""
        response = self._call(self._stub.ReloadModel, pb.ReloadModelRequest(path=path))
        return {"version": response.model.version, "generation": response.model.generation,
                "previous_version": response.previous_version,
                "load_seconds": response.load_seconds,
                "warmup_seconds": response.warmup_seconds}

    def score_many(self, triples: Sequence[Triple], *, max_staleness_sequences: int = 0,
                   max_staleness_ms: int = 0) -> List[Score]:
        """ScoreTriplets: many facts in one call (the server bounds how many); facts that
        share (head, relation) share one pass. max_staleness_*: as score()."""
        request = pb.ScoreTripletsRequest(
            triples=[pb.Triple(head=h, relation=r, tail=t) for h, r, t in triples],
            min_graph_sequence=self.session.sequence,
            max_staleness=pb.Staleness(max_sequences=max_staleness_sequences,
                                       max_milliseconds=max_staleness_ms))
        response = self._call(self._stub.ScoreTriplets, request)
        return [_score(t, r) for t, r in zip(triples, response.results)]

    def rank_tails(self, head: str, relation: str, *, candidates: Optional[Sequence[str]] = None,
                   top_k: int = 0, filter_known: bool = False, max_visited_nodes: int = 0,
                   max_visited_edges: int = 0) -> Ranking:
        """RankTails: candidate tails best first (every entity when candidates is None).
        max_visited_nodes/edges: a path-family ranking's budget, at most the server's (0: the
        server's); a neighbourhood past it is pruned (Ranking.candidates_pruned)."""
        return _ranking(self._call(self._stub.RankTails, pb.RankTailsRequest(
            head=head, relation=relation,
            options=_rank_options(candidates, top_k, filter_known, max_visited_nodes,
                                  max_visited_edges),
            min_graph_sequence=self.session.sequence)))

    def rank_heads(self, relation: str, tail: str, *, candidates: Optional[Sequence[str]] = None,
                   top_k: int = 0, filter_known: bool = False, max_visited_nodes: int = 0,
                   max_visited_edges: int = 0) -> Ranking:
        """RankHeads: candidate heads best first (every entity when candidates is None)."""
        return _ranking(self._call(self._stub.RankHeads, pb.RankHeadsRequest(
            relation=relation, tail=tail,
            options=_rank_options(candidates, top_k, filter_known, max_visited_nodes,
                                  max_visited_edges),
            min_graph_sequence=self.session.sequence)))

    def add_triples(self, triples: Iterable[Triple], chunk: int = 1000) -> Iterator[AddAck]:
        """AddTriples: streams `triples` in chunks of `chunk` facts and yields one AddAck per
        chunk as the server acknowledges it. A rejected chunk raises GrailError naming its
        line (lines count from 1 over the whole iterable); the chunks acknowledged before
        it are stored."""
        for ack, sent in self._stream_chunks(self._stub.AddTriples, triples, chunk,
                                             self._triple_chunk(pb.AddTriplesRequest)):
            yield AddAck(int(ack.sequence), int(ack.chunk_index), ack.facts_added,
                         ack.duplicate_facts, ack.entities_created, ack.relations_created, sent)

    def remove_triples(self, triples: Iterable[Triple],
                       chunk: int = 1000) -> Iterator[RemoveAck]:
        """RemoveTriples: streams `triples` in chunks like add_triples and yields one
        RemoveAck per chunk as the server acknowledges it. Facts not stored are ignored
        (counted in facts_not_present); entities stay, even without facts."""
        for ack, sent in self._stream_chunks(self._stub.RemoveTriples, triples, chunk,
                                             self._triple_chunk(pb.RemoveTriplesRequest)):
            yield RemoveAck(int(ack.sequence), int(ack.chunk_index), ack.facts_removed,
                            ack.facts_not_present, sent, ack.entities_removed,
                            ack.entities_not_present)

    def remove_entities(self, names: Iterable[str], chunk: int = 1000) -> Iterator[RemoveAck]:
        """RemoveTriples with entities: removes each named entity with all its facts, `chunk`
        names per chunk; yields one RemoveAck per chunk (entities_removed, facts_removed).
        A removed name is NOT_FOUND afterwards until a fact names it again."""
        for ack, _ in self._stream_chunks(
                self._stub.RemoveTriples, names, chunk,
                lambda batch, first_line: pb.RemoveTriplesRequest(entities=batch)):
            yield RemoveAck(int(ack.sequence), int(ack.chunk_index), ack.facts_removed,
                            ack.facts_not_present, 0, ack.entities_removed,
                            ack.entities_not_present)

    def remove_relations(self, names: Iterable[str], chunk: int = 1000) -> Iterator[RemoveAck]:
        """RemoveTriples with relations: removes every fact of each named relation, `chunk`
        names per chunk; yields one RemoveAck per chunk (relations_removed, facts_removed).
        The relation then no longer counts in stats()["relations"] nor in a reloaded model's
        vocabulary check."""
        for ack, _ in self._stream_chunks(
                self._stub.RemoveTriples, names, chunk,
                lambda batch, first_line: pb.RemoveTriplesRequest(relations=batch)):
            yield RemoveAck(int(ack.sequence), int(ack.chunk_index), ack.facts_removed,
                            ack.facts_not_present, 0, relations_removed=ack.relations_removed,
                            relations_not_present=ack.relations_not_present)

    @staticmethod
    def _triple_chunk(request_type):
        """Builds a request of `request_type` from a batch of (head, relation, tail)."""
        return lambda batch, first_line: request_type(
            triples=[pb.Triple(head=h, relation=r, tail=t) for h, r, t in batch],
            first_line=first_line)

    def create_checkpoint(self, directory: str) -> dict:
        """CreateCheckpoint (admin scope): a consistent copy of the server's graph store in
        `directory`, an absolute path on the server's machine that must not exist. Returns the
        dir and the graph_sequence it holds."""
        response = self._call(self._stub.CreateCheckpoint,
                              pb.CreateCheckpointRequest(dir=directory))
        return {"dir": response.dir, "graph_sequence": response.graph_sequence}

    def export_pages(self, *, since_sequence: int = 0, page: int = 0) -> Iterator[ExportPage]:
        """ExportTriples (write scope): the facts of one version of the graph, page by page,
        in order of addition; with since_sequence S (the graph_sequence of an earlier export),
        only those added after S and still stored. The first page comes even when there is no
        fact. The iteration ends once the export is whole; an error raises GrailError, and
        what came before it is incomplete. page: facts per message (0: the server's 10000).
        No deadline: the stream lasts as long as the graph takes."""
        try:
            for response in self._stub.ExportTriples(
                    pb.ExportTriplesRequest(since_sequence=since_sequence, max_page_facts=page),
                    timeout=None):
                yield ExportPage(
                    graph_sequence=response.graph_sequence,
                    triples=[(t.head, t.relation, t.tail) for t in response.triples],
                    sequences=list(response.sequences))
        except grpc.RpcError as e:
            raise GrailError(e.code(), e.details() or "") from None

    def export_to_file(self, path: str, *, since_sequence: int = 0, page: int = 0) -> dict:
        """export_pages into `path` as a triple file (head TAB relation TAB tail per line, in
        order of addition), written as PATH.partial and renamed once whole, as grail-client
        export does. Returns graph_sequence, facts and pages."""
        partial = path + ".partial"
        summary = {"graph_sequence": 0, "facts": 0, "pages": 0}
        try:
            with open(partial, "w", encoding="utf-8", newline="\n") as out:
                for p in self.export_pages(since_sequence=since_sequence, page=page):
                    summary["graph_sequence"] = p.graph_sequence
                    summary["facts"] += len(p.triples)
                    summary["pages"] += 1
                    out.writelines(f"{h}\t{r}\t{t}\n" for h, r, t in p.triples)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, path)
        except BaseException:
            if os.path.exists(partial):
                os.remove(partial)
            raise
        return summary

    def _stream_chunks(self, method, items: Iterable, chunk: int, make_request):
        """Streams `items` through `method`, `chunk` per request built by
        make_request(batch, first_line) (lines count items from 1); yields (ack, items in its
        chunk)."""
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        sent = []  # items per chunk sent

        def requests():
            batch, first_line = [], 1
            for line, item in enumerate(items, start=1):
                batch.append(item)
                if len(batch) == chunk:
                    sent.append(len(batch))
                    yield make_request(batch, first_line)
                    batch, first_line = [], line + 1
            if batch:
                sent.append(len(batch))
                yield make_request(batch, first_line)

        try:
            for ack in method(requests(), timeout=None):
                self.session.saw(ack.sequence)
                index = int(ack.chunk_index)
                yield ack, sent[index] if index < len(sent) else 0
        except grpc.RpcError as e:
            raise GrailError(e.code(), e.details() or "") from None

    def stats(self) -> dict:
        """GetStats: the graph's size and the model, as a dict."""
        response = self._call(self._stub.GetStats,
                              pb.GetStatsRequest(min_graph_sequence=self.session.sequence))
        model = response.model
        return {
            "entities": response.entities, "relations": response.relations,
            "facts": response.facts, "graph_sequence": response.graph_sequence,
            "model": {"path": model.path, "format": model.format,
                      "relations": list(model.relations), "hops": model.hops,
                      "layers": model.layers, "dim": model.dim, "parameters": model.parameters,
                      "training_fingerprint": model.training_fingerprint,
                      "device": model.device, "version": model.version,
                      "generation": model.generation},
            "max_batch_size": response.max_batch_size,
            "max_chunk_facts": response.max_chunk_facts,
            "max_request_triples": response.max_request_triples,
            "uptime_seconds": response.uptime_seconds, "version": response.version,
        }

    def health(self) -> str:
        """grpc.health.v1: "SERVING", "NOT_SERVING" or "UNKNOWN" (needs no token)."""
        data = self._call(self._health, None)
        # HealthCheckResponse: field 1, an enum; UNKNOWN (0) is sent as nothing.
        status = data[1] if len(data) == 2 and data[0] == 0x08 else 0
        return {1: "SERVING", 2: "NOT_SERVING"}.get(status, "UNKNOWN")


def _scored_by(value) -> str:
    """The proto's ScoredBy as the lower-case scorer name ("" if unset)."""
    return {pb.SCORED_BY_GRAIL: "grail", pb.SCORED_BY_PATH: "path",
            pb.SCORED_BY_FUSED: "fused", pb.SCORED_BY_ENSEMBLE: "ensemble"}.get(value, "")


def _score(triple: Triple, r) -> Score:
    paths = tuple(
        ExplanationPath(p.rule, p.weight, tuple(p.layer_weights),
                        tuple(PathStep(s.from_entity, s.relation, s.to_entity, s.inverse,
                                       tuple(s.attention)) for s in p.steps))
        for p in r.paths)
    return Score(triple[0], triple[1], triple[2], r.score, r.probability, r.known_fact,
                 r.subgraph_nodes, r.subgraph_edges, r.graph_sequence, r.model_version, paths,
                 _scored_by(r.scored_by), r.pruned)


def _rank_options(candidates, top_k, filter_known, max_visited_nodes=0, max_visited_edges=0):
    if top_k < 0:
        raise ValueError("top_k must be at least 0")
    if max_visited_nodes < 0 or max_visited_edges < 0:
        raise ValueError("max_visited_nodes and max_visited_edges must be at least 0")
    return pb.RankOptions(candidates=list(candidates or []), top_k=top_k,
                          filter_known_facts=filter_known, max_visited_nodes=max_visited_nodes,
                          max_visited_edges=max_visited_edges)


def _ranking(r) -> Ranking:
    return Ranking([RankedEntity(e.rank, e.entity, e.score, e.known_fact, _scored_by(e.scored_by),
                                 e.pruned) for e in r.ranked],
                   r.candidates_scored, r.candidates_filtered, r.candidates_shared_score,
                   r.graph_sequence, r.candidates_pruned)
