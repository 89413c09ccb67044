#!/usr/bin/python3
"""A pipeline that talks to Redis the way upstream ArchiveBot's pipeline
does (pipeline/archivebot/control.py, wpull/settings.py,
seesaw/monitoring.py, seesaw/tasks.py), with Debian's python3-redis.

Our own code: it sends the same command sequence, over the same redis-py
paths (register_script + EVALSHA, the log shipper's non-transactional
pipeline with SCRIPT EXISTS first, a separate pub/sub connection for the
settings listener), without wpull or seesaw.

    upstream_pipeline.py REDIS_URL MODE NICK JOBS

MODE "bridge": the scripts are called by upstream's SHA1 (the bridge
knows them by it); MODE "direct": by the SHA1 of this file's own Lua
with upstream's semantics, loaded into a real Redis on NOSCRIPT as
redis-py does. JOBS: how many jobs to run.

It prints one line per step on stdout ("TAKEN ident", "SETTINGS ident
age delay_min delay_max abort_requested", "LOGGED ident n", "ABORTED
ident", "DONE ident aborted") and, after each job is taken, waits for
what the test does through IRC: a settings change, then (for the first
job) !abort.
"""

import hashlib
import warnings
import json
import sys
import threading
import time
import queue

import redis

warnings.simplefilter("ignore", DeprecationWarning)
from redis.commands.core import Script

UPSTREAM_SHA = {
    "mark_done": "988576b47e799af8a2e75e51a00270229eff4b4f",
    "mark_aborted": "1aec4a5b4bd49991a398ee21bd367773b009b300",
    "log": "f6fda5256637da887e5745b23660c71a16a25ed0",
}

# Our Lua, with the effects of upstream's three scripts and their KEYS and
# ARGV (doc/protocol.md, What a pipeline does).
OWN_LUA = {
    "mark_done": """-- archivebot-go test pipeline: mark done
local job = KEYS[1]
redis.call('HSET', job, 'finished_at', ARGV[3])
redis.call('LREM', 'working', 1, job)
local ttl = ARGV[1]
if redis.call('HGET', job, 'aborted') then
  redis.call('INCR', 'jobs_aborted')
  ttl = 5
else
  redis.call('INCR', 'jobs_completed')
end
redis.call('EXPIRE', job, ttl)
redis.call('EXPIRE', ARGV[5], ttl)
redis.call('EXPIRE', job .. '_ignores', ttl)
redis.call('RPUSH', 'finish_notifications', ARGV[4])
redis.call('PUBLISH', ARGV[2], job)
""",
    "mark_aborted": """-- archivebot-go test pipeline: mark aborted
redis.call('HSET', KEYS[1], 'aborted', 'true')
redis.call('PUBLISH', ARGV[1], KEYS[1])
""",
    "log": """-- archivebot-go test pipeline: log
local score = redis.call('HINCRBY', KEYS[1], 'log_score', 1)
redis.call('ZADD', ARGV[3], score, ARGV[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
""",
}

LOG_CHANNEL = "updates"
PIPELINE_CHANNEL = "archivebot:pipeline_updates"
EXPIRE_TIME = 60 * 60 * 48
WAIT = 60


SAY = threading.Lock()


def say(*parts):
    # One whole line at a time: threads print too.
    with SAY:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()


def script(r, name, mode):
    s = Script(r, OWN_LUA[name])
    if mode == "bridge":
        s.sha = UPSTREAM_SHA[name]
    return s


class Control:
    def __init__(self, url, mode):
        self.url = url
        self.redis = redis.StrictRedis.from_url(url, decode_responses=True)
        self.mark_done_script = script(self.redis, "mark_done", mode)
        self.mark_aborted_script = script(self.redis, "mark_aborted", mode)
        self.log_script = script(self.redis, "log", mode)
        self.log_queue = queue.Queue()
        self.counts = {"bytes_downloaded": 0, "items_downloaded": 0, "items_queued": 0}
        self.counts_lock = threading.Lock()
        self.shipped = 0
        self.shipped_cv = threading.Condition()
        self.job_ident = None
        self.shipper = threading.Thread(target=self.ship_logs, daemon=True)
        self.shipper.start()

    def reserve_job(self, pipeline_id, nick):
        named = set(self.redis.scan_iter("pending:*"))
        candidates = sorted(q for q in named if q[len("pending:"):] in nick)
        candidates += ["pending-ao", "pending"]
        for q in candidates:
            ident = self.redis.rpoplpush(q, "working")
            if ident:
                self.redis.hmset(ident, {"started_at": time.time(), "pipeline_id": pipeline_id})
                return ident, self.redis.hgetall(ident)
        return None, None

    def heartbeat(self, ident):
        self.redis.hincrby(ident, "heartbeat", 1)

    def is_aborted(self, ident):
        return self.redis.hget(ident, "aborted")

    def get_settings(self, ident):
        d = self.redis.hmget(ident, "delay_min", "delay_max", "concurrency", "settings_age",
                             "abort_requested", "suppress_ignore_reports", "ignore_patterns_set_key")
        s = dict(delay_min=d[0], delay_max=d[1], concurrency=d[2], age=d[3],
                 abort_requested=d[4], suppress_ignore_reports=d[5])
        s["ignore_patterns"] = sorted(self.redis.smembers(d[6])) if d[6] else []
        return s

    def mark_done(self, ident, info, log_key):
        self.mark_done_script(keys=[ident], args=[EXPIRE_TIME, LOG_CHANNEL, int(time.time()),
                                                  json.dumps(info), log_key])

    def mark_aborted(self, ident):
        self.mark_aborted_script(keys=[ident], args=[LOG_CHANNEL])

    def pipeline_report(self, pipeline_id, report):
        self.redis.hmset(pipeline_id, report)
        self.redis.sadd("pipelines", pipeline_id)
        self.redis.publish(PIPELINE_CHANNEL, pipeline_id)

    def unregister_pipeline(self, pipeline_id):
        self.redis.delete(pipeline_id)
        self.redis.srem("pipelines", pipeline_id)
        self.redis.publish(PIPELINE_CHANNEL, pipeline_id)

    def log(self, packet, ident, log_key):
        self.log_queue.put({"keys": [ident], "args": [json.dumps(packet), LOG_CHANNEL, log_key]})

    def count(self, field, n):
        with self.counts_lock:
            self.counts[field] += n

    def ship_logs(self):
        # The log shipper: its own connection, one non-transactional
        # pipeline, executed when the queue runs dry or 64 entries wait.
        r = redis.StrictRedis.from_url(self.url, decode_responses=True)
        pending = 0
        with r.pipeline(transaction=False) as pipe:
            while True:
                try:
                    entry = self.log_queue.get(timeout=0.2)
                    self.log_script(keys=entry["keys"], args=entry["args"], client=pipe)
                    pending += 1
                except queue.Empty:
                    pass
                if pending and (self.log_queue.empty() or pending >= 64):
                    with self.counts_lock:
                        counts, self.counts = self.counts, {k: 0 for k in self.counts}
                    for field, n in counts.items():
                        if n > 0 and self.job_ident:
                            pipe.hincrby(self.job_ident, field, n)
                    pipe.execute()
                    with self.shipped_cv:
                        self.shipped += pending
                        self.shipped_cv.notify_all()
                    pending = 0

    def wait_shipped(self, n):
        with self.shipped_cv:
            if not self.shipped_cv.wait_for(lambda: self.shipped >= n, timeout=WAIT):
                raise SystemExit("log shipper: %d of %d entries shipped" % (self.shipped, n))


class Listener(threading.Thread):
    """The settings listener: its own pub/sub connection (not decoded, as
    upstream's), a read at start, and a read on every larger age."""

    def __init__(self, url, control, ident):
        super().__init__(daemon=True)
        self.url, self.control, self.job_ident = url, control, ident
        self.settings = control.get_settings(ident)
        # Subscribed before the job goes on (upstream's listener also
        # re-reads every 30 s, which a test cannot wait for).
        self.pubsub = redis.StrictRedis.from_url(url).pubsub()
        self.pubsub.subscribe("archivebot:job:" + ident)
        while self.pubsub.get_message(timeout=1) is None:
            pass
        self.lock = threading.Condition()
        self.running = True

    def age(self):
        return int(self.settings["age"] or 0)

    def run(self):
        p = self.pubsub
        while self.running:
            msg = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if msg and int(msg["data"]) > self.age():
                s = self.control.get_settings(self.job_ident)
                say("SETTINGS", self.job_ident, s["age"], s["delay_min"], s["delay_max"],
                    s["abort_requested"] or "-", ",".join(s["ignore_patterns"]) or "-")
                with self.lock:
                    self.settings = s
                    self.lock.notify_all()
        p.close()

    def wait(self, pred):
        with self.lock:
            if not self.lock.wait_for(lambda: pred(self.settings), timeout=WAIT):
                raise SystemExit("settings listener: timed out; settings %r" % (self.settings,))


def main():
    url, mode, nick, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    control = Control(url, mode)
    pipeline_id = "pipeline:" + hashlib.md5(("%s:%s" % (nick, mode)).encode()).hexdigest()

    reporting = True

    def report():
        while reporting:
            control.pipeline_report(pipeline_id, {
                "id": pipeline_id, "hostname": "test.invalid", "nickname": nick, "fqdn": "test.invalid",
                "pid": 4242, "version": "20190723.01", "mem_usage": 20.5, "mem_available": 1 << 30,
                "disk_usage": 40.0, "disk_available": 1 << 34, "ts": int(time.time()), "python": sys.version,
            })
            time.sleep(1)

    threading.Thread(target=report, daemon=True).start()

    for n in range(jobs):
        deadline = time.time() + WAIT
        ident = None
        while ident is None:
            ident, job = control.reserve_job(pipeline_id, nick)
            if ident is None:
                if time.time() > deadline:
                    raise SystemExit("no job to take")
                time.sleep(0.2)
        control.job_ident = ident
        say("TAKEN", ident, job.get("url"))
        beating = threading.Event()

        def beat(ident=ident):
            while not beating.is_set():
                control.heartbeat(ident)
                beating.wait(0.2)

        hb = threading.Thread(target=beat, daemon=True)
        hb.start()
        listener = Listener(url, control, ident)
        listener.start()
        first_age = listener.age()
        say("READY", ident, first_age)
        # The test changes a setting (!d) now: it arrives through the
        # subscription.
        listener.wait(lambda s: int(s["age"] or 0) > first_age)
        entries = 200 if n == 0 else 50
        codes = [200, 200, 200, 301, 404, 500]
        base = control.shipped
        for i in range(entries):
            code = codes[i % len(codes)]
            control.log({"ts": time.time(), "url": "%spage/%d" % (job.get("url"), i), "response_code": code,
                         "wget_code": "OK", "is_error": code >= 500, "is_warning": 400 <= code < 500,
                         "type": "download"}, ident, job.get("log_key"))
            control.count("bytes_downloaded", 1000)
            control.count("items_downloaded", 1)
            control.count("items_queued", 2)
            if i % 50 == 49:
                time.sleep(0.05)
        control.wait_shipped(base + entries)
        say("LOGGED", ident, entries)
        aborted = False
        if n == 0:
            # The test says !abort now; wpull sees abort_requested in its
            # settings, marks the job aborted and stops.
            listener.wait(lambda s: bool(s["abort_requested"]))
            control.mark_aborted(ident)
            say("ABORTED", ident)
        listener.running = False
        beating.set()
        hb.join()
        listener.join()
        # RelabelIfAborted, WriteInfo, MarkItemAsDone.
        if control.is_aborted(ident):
            aborted = True
        info = {"aborted": aborted, "fetch_depth": job.get("fetch_depth"), "pipeline_id": pipeline_id,
                "queued_at": job.get("queued_at"), "started_by": job.get("started_by"),
                "started_in": job.get("started_in"), "url": job.get("url"), "url_file": job.get("url_file")}
        control.mark_done(ident, info, job.get("log_key"))
        control.job_ident = None
        say("DONE", ident, aborted)
    reporting = False
    time.sleep(0.1)
    control.unregister_pipeline(pipeline_id)
    say("EXIT")


if __name__ == "__main__":
    main()
