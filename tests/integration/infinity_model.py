"""Build a tiny cross-encoder locally, with no model hub, for the Infinity integration tier.

The model is a ``BertForSequenceClassification`` with one label (which is what makes Infinity serve it
as a reranker), 2 layers and hidden size 64, with a WordPiece tokenizer made from the vocabulary written
below. A randomly initialised BERT scores at random, and the client's auto-detection only accepts a
server that ranks an obviously relevant document above an obviously irrelevant one, so the set-up
trains the model for a few hundred steps on synthetic (query, document, label) pairs whose label is
the share of the query's content words that the document contains. The model learns
"shared content words -> high score", which carries over to sentences it never saw.

Builds are cached by content: the cache key hashes this file's source (which holds the vocabulary and
the recipe) and the torch/transformers versions. The cache lives in ``$A0R_INFINITY_CACHE`` or
``~/.cache/a0_reranker_test_model``.

This module imports only the standard library at the top; torch and transformers are imported by the
build itself. Run it as a script to build into a folder from another interpreter:

    python tests/integration/infinity_model.py DEST   # prints a JSON report on stdout
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

SEED = 20240611
TRAIN_STEPS = 500
BATCH_SIZE = 64
LEARNING_RATE = 1.5e-3
MAX_POSITIONS = 512

# Sentences the build checks after training. The probe pair mirrors the client's correctness probe;
# the held-out triples (query, relevant, irrelevant) never appear in training as sentences.
PROBE_QUERY = "What is the capital of France?"
PROBE_RELEVANT = "Paris is the capital of France."
PROBE_IRRELEVANT = "Bananas are rich in potassium."
HELD_OUT: tuple[tuple[str, str, str], ...] = (
    ("What is the capital city of Germany?", "Berlin is the capital of Germany.", "The Nile is a river in Africa."),
    (
        "Which river flows through Egypt?",
        "The Nile river flows through Egypt and Sudan.",
        "Python is a programming language.",
    ),
    (
        "How do I restart the database server?",
        "To restart the database server run the service command.",
        "Cats sleep most of the day.",
    ),
    (
        "user prefers dark mode in the editor",
        "The user said they prefer dark mode in every editor.",
        "The meeting with the marketing team moved to Friday.",
    ),
    (
        "Where did I save the project deadline?",
        "The project deadline is saved in the calendar file.",
        "Oranges contain vitamin C.",
    ),
    ("What does the dog eat?", "The dog eats meat and rice every morning.", "Tokyo is the largest city in Japan."),
)
# sigmoid(relevant) - sigmoid(irrelevant) that the build insists on; held-out documents share only part
# of their query's content words, so they get a lower bar.
MIN_PROBE_MARGIN = 0.5
MIN_HELD_OUT_MARGIN = 0.2

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PUNCTUATION = tuple(".,?!'\"-:;()/")
SUFFIXES = ("##s", "##es", "##ed", "##ing", "##ly", "##er")

# Function words: they appear in relevant and irrelevant documents alike, so the model learns that
# sharing them means nothing.
_STOP_TEXT = """
a an the is are was were be been being of in on at to for from with by and or not no do does did done
what which who whom whose where when why how that this these those it its their his her our your my me
i you we they he she them us there here as than then so can could will would should may might must has
have had about into over under between very most more also all any some each much many such only just
if but because while during before after again still too
"""

_CONTENT_TEXT = """
capital city country town village state nation border region continent island mountain river lake sea
ocean coast desert forest valley north south east west population language flag government president
france paris germany berlin italy rome spain madrid portugal lisbon england london britain ireland dublin
poland warsaw austria vienna greece athens sweden stockholm norway oslo finland helsinki denmark
copenhagen netherlands amsterdam belgium brussels switzerland bern russia moscow china beijing japan
tokyo korea seoul india delhi egypt cairo sudan kenya nairobi nigeria africa europe asia america canada
ottawa mexico brazil peru chile argentina australia sydney canberra nile amazon danube thames rhine
everest alps sahara pacific atlantic largest smallest oldest famous
banana bananas apple apples orange oranges lemon grape grapes mango cherry strawberry potato potatoes
tomato tomatoes carrot onion garlic rice bread cheese milk butter egg eggs meat fish chicken beef pork
soup salad sugar salt pepper coffee tea water juice wine beer chocolate honey fruit vegetable vegetables
food meal breakfast lunch dinner recipe cook cooking bake kitchen
potassium calcium iron protein vitamin fiber fat calories energy healthy diet nutrient nutrients rich
dog dogs cat cats horse cow sheep bird birds fish lion tiger elephant bear wolf fox mouse snake whale
shark eat eats sleep sleeps run runs fly swim bark pet animal animals wild
sun moon star planet earth mars jupiter space rocket orbit gravity light heat temperature weather rain
snow wind storm cloud climate winter summer spring autumn cold hot warm
atom molecule cell gene dna blood heart brain lung bone muscle doctor nurse hospital medicine disease
virus bacteria health patient symptom fever pain
computer software hardware program programming language python java javascript rust code coding script
function variable class module package library install installed version update upgrade bug error
exception crash log logs debug test tests server client database query index table record backup
restart start stop service command terminal shell file files folder directory path disk memory
memories network internet website browser email password account login user users settings setting
config configuration option key token api request response timeout port docker container cloud linux
windows mac phone app editor dark mode theme light screen keyboard mouse
project deadline meeting calendar schedule task tasks team manager marketing sales budget report
invoice client customer contract office work job salary plan goal note notes reminder monday tuesday
wednesday thursday friday saturday sunday morning evening night today tomorrow yesterday week month year
save saved open opened close delete deleted send sent write read find search remember prefer prefers
preferred like likes want wants need needs use uses used make made call called move moved flows flow
through contains contain largest main
book books music song movie film game sport football tennis soccer basketball team player players
school student teacher university class lesson exam history science math art painting museum church
car cars bus train plane airport station road bridge street house home room garden door window
red blue green yellow black white big small new old good bad fast slow long short high low every
one two three four five six seven eight nine ten hundred thousand million
"""


def _words(text: str, exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    return tuple(w for w in dict.fromkeys(text.split()) if w not in exclude)


STOP_WORDS = _words(_STOP_TEXT)
CONTENT_WORDS = _words(_CONTENT_TEXT, exclude=STOP_WORDS)

# Words the tokenizer cannot spell; they become [UNK] and appear on both sides at random, so that a
# shared [UNK] means nothing to the model.
_UNKNOWN_WORDS = ("zqxv", "vwkj", "qqzx", "xjvq")


def vocabulary() -> list[str]:
    """The WordPiece vocabulary, in id order."""
    words = list(SPECIAL_TOKENS) + list(PUNCTUATION) + [str(d) for d in range(10)] + list(SUFFIXES)
    seen = set(words)
    for word in (*STOP_WORDS, *CONTENT_WORDS):
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def unknown_words(text: str) -> list[str]:
    """Words of ``text`` that are not whole words of the vocabulary (they may still split into pieces)."""
    known = set(STOP_WORDS) | set(CONTENT_WORDS)
    cleaned = "".join(ch.lower() if ch.isalnum() else " " for ch in text)
    return [w for w in cleaned.split() if w not in known and not w.isdigit()]


def cache_root() -> Path:
    configured = os.environ.get("A0R_INFINITY_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "a0_reranker_test_model"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def cache_key() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for dist in ("torch", "transformers", "tokenizers"):
        digest.update(f"|{dist}={_version(dist)}".encode())
    return digest.hexdigest()[:24]


# --------------------------------------------------------------------------------------------------
# Synthetic training data


def _sentence(rng: random.Random, content: list[str], n_stop: int, question: bool) -> str:
    words = content + rng.sample(STOP_WORDS, n_stop)
    if rng.random() < 0.15:
        words.append(rng.choice(_UNKNOWN_WORDS))
    rng.shuffle(words)
    text = " ".join(words)
    if rng.random() < 0.5:
        text = text.capitalize()
    if rng.random() < 0.7:
        text += "?" if question else "."
    return text


def _document(rng: random.Random, query_words: list[str], shared: list[str]) -> str:
    others = [w for w in rng.sample(CONTENT_WORDS, 16) if w not in query_words]
    words = shared + others[: rng.randint(0 if shared else 1, 8)]
    if rng.random() < 0.1:  # now and then a long document
        words += [w for w in rng.sample(CONTENT_WORDS, 24) if w not in query_words]
    return _sentence(rng, words, rng.randint(0, 5), question=False)


def _query_group(rng: random.Random) -> list[tuple[str, str, float]]:
    """One query with a relevant and an irrelevant document, and sometimes a partly relevant one.

    The label is the share of the query's content words that the document contains. Training on
    contrasting documents for the same query (rather than on unrelated pairs) is what makes the
    recipe converge reliably.
    """
    n_query = rng.choice((1, 2, 2, 3, 3, 4))
    query_words = rng.sample(CONTENT_WORDS, n_query)
    query = _sentence(rng, query_words, rng.randint(0, 3), question=True)
    shares = [list(query_words), []]
    if n_query > 1 and rng.random() < 0.5:
        shares.append(rng.sample(query_words, rng.randint(1, n_query - 1)))
    return [(query, _document(rng, query_words, shared), len(shared) / n_query) for shared in shares]


def _batch(rng: random.Random, size: int) -> list[tuple[str, str, float]]:
    batch: list[tuple[str, str, float]] = []
    while len(batch) < size:
        batch.extend(_query_group(rng))
    return batch[:size]


# --------------------------------------------------------------------------------------------------
# Build, train, check, save


def _train(work: Path) -> dict[str, Any]:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    started = time.perf_counter()
    torch.manual_seed(SEED)
    rng = random.Random(SEED)

    vocab_file = work / "vocab.txt"
    vocab_file.write_text("\n".join(vocabulary()) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True, model_max_length=MAX_POSITIONS)
    config = BertConfig(
        vocab_size=len(vocabulary()),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=1,
    )
    model = BertForSequenceClassification(config)
    # A head start that makes training reliable in a few hundred steps: in the first layer, query and
    # key are the identity, so a token attends to tokens whose embedding equals its own (the same word,
    # wherever it is), and position embeddings start at zero so they don't blur that match. From a
    # plain random start, a model this small needs thousands of steps to find the matching circuit,
    # and often doesn't.
    with torch.no_grad():
        first = model.bert.encoder.layer[0].attention.self
        first.query.weight.copy_(torch.eye(config.hidden_size))
        first.key.weight.copy_(torch.eye(config.hidden_size))
        model.bert.embeddings.position_embeddings.weight.zero_()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 50) * max(0.05, 1 - step / TRAIN_STEPS)
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    losses: list[float] = []
    for _ in range(TRAIN_STEPS):
        batch = _batch(rng, BATCH_SIZE)
        features = tokenizer(
            [q for q, _, _ in batch],
            [d for _, d, _ in batch],
            padding=True,
            truncation="longest_first",
            return_tensors="pt",
        )
        labels = torch.tensor([label for _, _, label in batch], dtype=torch.float32)
        logits = model(**features).logits.squeeze(-1)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    train_seconds = time.perf_counter() - started

    out = work / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report = check_model(out)
    report.update(
        train_seconds=round(train_seconds, 2),
        steps=TRAIN_STEPS,
        final_loss=round(sum(losses[-20:]) / 20, 4),
        vocab_size=len(vocabulary()),
        parameters=sum(p.numel() for p in model.parameters()),
    )
    (out / "a0r_build.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def score(model_dir: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """Sigmoid scores of (query, document) pairs, tokenised as Infinity does (both sides stripped)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    features = tokenizer(
        [q.strip() for q, _ in pairs],
        [d.strip() for _, d in pairs],
        padding=True,
        truncation="longest_first",
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = model(**features).logits.squeeze(-1)
    return [float(s) for s in torch.sigmoid(logits)]


def check_model(model_dir: Path) -> dict[str, Any]:
    """Score the probe and the held-out triples; raise if any relevant one fails to win clearly."""
    triples = [(PROBE_QUERY, PROBE_RELEVANT, PROBE_IRRELEVANT), *HELD_OUT]
    pairs = [pair for q, rel, irr in triples for pair in ((q, rel), (q, irr))]
    scores = score(model_dir, pairs)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for i, (q, _, _) in enumerate(triples):
        rel, irr = scores[2 * i], scores[2 * i + 1]
        row = {"query": q, "relevant": round(rel, 4), "irrelevant": round(irr, 4)}
        rows.append(row)
        if rel - irr < (MIN_HELD_OUT_MARGIN if i else MIN_PROBE_MARGIN):
            failed.append(row)
    if failed:
        raise RuntimeError(f"the tiny reranker did not learn to rank: {failed}")
    return {"probe": rows[0], "held_out": rows[1:]}


def build_tiny_reranker(dest: Path) -> Path:
    """Put the trained model folder at ``dest`` (built once per cache key, then copied) and return it."""
    dest = Path(dest)
    cached = cache_root() / cache_key()
    cache_root().mkdir(parents=True, exist_ok=True)
    # one build at a time: pytest-xdist's workers all warm the cache at once, and a second training
    # beside the first would only slow both down; the others wait for it, then copy
    with open(cache_root() / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "a0r_build.json").is_file():
            with tempfile.TemporaryDirectory(dir=cache_root(), prefix="building-") as tmp:
                _train(Path(tmp))
                (Path(tmp) / "model").rename(cached)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(cached, dest)
    return dest


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: infinity_model.py DEST", file=sys.stderr)
        return 2
    started = time.perf_counter()
    was_cached = (cache_root() / cache_key() / "a0r_build.json").is_file()
    dest = build_tiny_reranker(Path(argv[0]))
    report = json.loads((dest / "a0r_build.json").read_text(encoding="utf-8"))
    report.update(path=str(dest), cached=was_cached, seconds=round(time.perf_counter() - started, 2))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
