"""Drives upstream's own pipeline code (ArchiveTeam/ArchiveBot:
pipeline/archivebot/control.py, the Control class with its three Lua
scripts, and pipeline/archivebot/seesaw/monitoring.py's report) from a
checkout of it, against the Redis at REDIS_URL. Nothing of upstream is
copied here: this file imports upstream's modules from the checkout and
does, step by step, what upstream's seesaw tasks (tasks.py: GetItemFromQueue,
StartHeartbeat, RelabelIfAborted, WriteInfo, MarkItemAsDone) and wpull
plugin (archive_bot_plugin.py: log_result, queued_url, dequeued_url,
handle_result) do with it, without seesaw, tornado, psutil or wpull: the
item dictionaries and log packets are built as those files build them.

Usage: python3 upstream_pipeline.py UPSTREAM_CHECKOUT NICKNAME [ao_only] [large] [clock=SECONDS] < steps
(clock=SECONDS moves the machine's clock, time.time(), by SECONDS.)
Steps, one a line:
  take                       GetItemFromQueue: reserve_job; prints "took IDENT" or "none"
  heartbeat IDENT N          StartHeartbeat's callback, N times
  log IDENT CODE...          log_result of one download per CODE (0: a network error)
  stdout IDENT TEXT          the stdout extension's packet
  counters IDENT B D Q       handle_result, dequeued_url, queued_url
  done IDENT                 RelabelIfAborted, WriteInfo, MarkItemAsDone (48 h)
  report                     monitoring.start's report
  exit                       the pipeline's on_cleanup: unregister_pipeline
  leave                      stop without unregistering (a pipeline still
                             running when the fixture is dumped, or a crash)
Each step but leave ends with a line "ok STEP" on standard output.
"""

import os
import sys
import time
import types

UPSTREAM = sys.argv[1]
NICK = sys.argv[2]
AO_ONLY = 'ao_only' in sys.argv[3:]
LARGE = 'large' in sys.argv[3:]

sys.path.insert(0, os.path.join(UPSTREAM, 'pipeline'))
for arg in sys.argv[3:]:
    if arg.startswith('clock='):
        _offset, _time = float(arg[len('clock='):]), time.time
        time.time = lambda: _time() + _offset

# monitoring.py imports psutil and tornado at module level; the report it
# builds reads memory, disk and load from psutil and os. Stand-ins give
# fixed figures.
psutil = types.ModuleType('psutil')
psutil.disk_usage = lambda path: types.SimpleNamespace(percent=42.5, free=123456789012)
psutil.virtual_memory = lambda: types.SimpleNamespace(percent=61.2, available=3456789012)
sys.modules['psutil'] = psutil
tornado = types.ModuleType('tornado')
tornado.ioloop = types.ModuleType('tornado.ioloop')


class PeriodicCallback:
    def __init__(self, fn, ms):
        pass

    def start(self):
        pass


tornado.ioloop.PeriodicCallback = PeriodicCallback
sys.modules['tornado'] = tornado
sys.modules['tornado.ioloop'] = tornado.ioloop

from archivebot import control as control_mod  # noqa: E402
from archivebot.seesaw import monitoring  # noqa: E402

VERSION = '20240101.abcdef0'  # pipeline.py: git show -s --format=%cd.%h
EXPIRE_TIME = 60 * 60 * 48    # pipeline.py
LOG_CHANNEL = 'updates'       # lib/shared_config.yml
PIPELINE_CHANNEL = 'archivebot:pipeline_updates'

control = control_mod.Control(os.environ['REDIS_URL'], LOG_CHANNEL, PIPELINE_CHANNEL)
_, _, _, pipeline_id = monitoring.pipeline_id()
print('pipeline', pipeline_id, NICK, flush=True)
items = {}


def report():
    pipeline = types.SimpleNamespace(data_dir='/', running_status='Running')
    monitoring.start(pipeline, control, VERSION, NICK)


def flush_logs():
    # The log shipper thread ships queued entries and the counters.
    control.log_queue.join()
    deadline = time.time() + 5
    while time.time() < deadline:
        with control.countslock:
            if not (control.bytes_downloaded_outstanding or control.items_downloaded_outstanding
                    or control.items_queued_outstanding):
                return
        time.sleep(0.01)


def is_error(statcode, err):
    # archive_bot_plugin.py's is_error: 5xx, or a wpull error code.
    return statcode >= 500 or err != 'OK'


def is_warning(statcode):
    # archive_bot_plugin.py's is_warning: 4xx.
    return 400 <= statcode < 500


for line in sys.stdin:
    words = line.split()
    if not words or words[0].startswith('#'):
        continue
    step, args = words[0], words[1:]
    if step == 'report':
        report()
    elif step == 'take':
        ident, job_data = control.reserve_job(pipeline_id, NICK, AO_ONLY, LARGE)
        if ident is None:
            print('none', flush=True)
            continue
        items[ident] = {
            'fetch_depth': job_data.get('fetch_depth'), 'ident': ident,
            'log_key': job_data.get('log_key'), 'pipeline_id': pipeline_id,
            'queued_at': job_data.get('queued_at'), 'slug': job_data.get('slug'),
            'started_by': job_data.get('started_by'), 'started_in': job_data.get('started_in'),
            'url': job_data.get('url'), 'url_file': job_data.get('url_file'),
            'user_agent': job_data.get('user_agent'),
            'no_offsite_links': job_data.get('no_offsite_links'),
            'youtube_dl': job_data.get('youtube_dl'),
        }
        control.log({'type': 'stdout', 'ts': int(time.time()),
                     'message': 'Received item %s.' % ident}, ident, job_data.get('log_key'))
        flush_logs()
        print('took', ident, flush=True)
    elif step == 'heartbeat':
        for _ in range(int(args[1])):
            control.heartbeat(args[0])
    elif step == 'log':
        item = items[args[0]]
        # wpull runs with ITEM_IDENT set: the counters are the item's.
        control.ident = item['ident']
        for i, code in enumerate(args[1:]):
            statcode = int(code)
            err = 'OK' if statcode else 'NETWORK_ERROR'
            packet = dict(ts=time.time(), url='%spage/%d' % (item['url'], i), response_code=statcode,
                          wget_code=err, is_error=is_error(statcode, err),
                          is_warning=is_warning(statcode), type='download')
            control.log(packet, item['ident'], item['log_key'])
        flush_logs()
    elif step == 'stdout':
        item = items[args[0]]
        control.log({'type': 'stdout', 'ts': int(time.time()), 'message': ' '.join(args[1:]) + '\n'},
                    item['ident'], item['log_key'])
        flush_logs()
    elif step == 'counters':
        control.ident = args[0]
        control.update_bytes_downloaded(int(args[1]))
        control.update_items_downloaded(int(args[2]))
        control.update_items_queued(int(args[3]))
        # The shipper commits counters with the next entry it ships.
        control.log({'type': 'stdout', 'ts': int(time.time()), 'message': 'counters\n'},
                    args[0], items[args[0]]['log_key'])
        flush_logs()
    elif step == 'done':
        item = items.pop(args[0])
        if control.is_aborted(item['ident']):
            item['aborted'] = True
        item['info'] = {
            'aborted': item.get('aborted', False), 'fetch_depth': item['fetch_depth'],
            'pipeline_id': item['pipeline_id'], 'queued_at': item['queued_at'],
            'started_by': item['started_by'], 'started_in': item['started_in'],
            'url': item['url'], 'url_file': item['url_file'],
        }
        control.mark_done(item, EXPIRE_TIME)
        print('done', item['ident'], 'aborted' if item['info']['aborted'] else 'finished', flush=True)
    elif step == 'exit':
        control.unregister_pipeline(pipeline_id)
    elif step == 'leave':
        break
    else:
        raise SystemExit('unknown step %r' % line)
    print('ok', step, flush=True)

flush_logs()
