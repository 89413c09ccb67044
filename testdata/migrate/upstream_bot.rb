# Drives upstream's own bot code (ArchiveTeam/ArchiveBot: bot/brain.rb,
# lib/job.rb, bot/summary.rb, bot/finish_notifier.rb,
# bot/pipeline_notifier.rb, dashboard/resources/*.rb) from a checkout of
# it, against the Redis at REDIS_URL. Nothing of upstream is copied here:
# this file loads upstream's files from the checkout and gives them what
# they get from their frameworks in production:
#
# - an IRC message (Cinch's): who typed the command, in which channel,
#   with which rank, and where the replies go (printed here);
# - the CouchDB views (ignore_patterns/by_name, user_agents/by_alias):
#   answered from this repository's testdata/reference/ignore_sets and
#   user_agents, as the views would answer for those documents;
# - Cinch::Plugin and Webmachine::Resource: just enough for upstream's
#   plugin and resource classes to load and their methods to run.
#
# Usage: ruby upstream_bot.rb UPSTREAM_CHECKOUT REFERENCE_DIR < commands
# Each input line is "NICK RANK CHANNEL TEXT" (RANK: o, v or -), as in
# testdata/reference/public.jsonl, or one of the readers:
#   @finish-notifier    upstream's FinishNotifier: pops finish_notifications
#   @pipelines          upstream's PipelineNotifier's view of the pipelines
#   @job IDENT          Job.from_ident and its to_status, as !status IDENT
#   @dashboard          the web app's /status, /pending, /pipelines,
#                       /logs/recent and /finished resources
#   @reaper N           upstream's reaper cog (cogs/reaper.rb): N checks
#   @clock SECONDS      the machine's clock moved by SECONDS from now on
#                       (Time.now, which upstream's Job#queue reads)
# Every reply and reader output is printed, one per line, prefixed with
# what produced it; the caller compares them.

require 'json'
require 'redis'
require 'fileutils'
require 'set'

UPSTREAM = ARGV.fetch(0)
REFERENCE = ARGV.fetch(1)

# --- Cinch and Webmachine, as much as upstream's classes use of them ---

module Cinch
  module Plugin
    def self.included(base)
      base.extend(ClassMethods)
    end

    module ClassMethods
      def timer(*) end
    end

    def initialize(config = {})
      @config = config
    end

    def config
      @config
    end
  end
end

module Celluloid
  def every(*) end
end

module Webmachine
  class Resource
    Request = Struct.new(:query, :path_tokens)
    Response = Struct.new(:headers)

    def request
      @request ||= Request.new({}, [])
    end

    def response
      @response ||= Response.new({})
    end
  end
end

# Upstream's files require 'cinch', 'webmachine' and 'celluloid'; the
# classes above stand for them.
require 'tmpdir'
stubs = Dir.mktmpdir
at_exit { FileUtils.rm_rf(stubs) }
%w[cinch webmachine celluloid].each { |f| File.write(File.join(stubs, "#{f}.rb"), '') }
$LOAD_PATH.unshift(stubs)
require File.join(UPSTREAM, 'bot/brain')
require File.join(UPSTREAM, 'bot/command_patterns')
require File.join(UPSTREAM, 'bot/finish_notifier')
require File.join(UPSTREAM, 'bot/pipeline_notifier')
require File.join(UPSTREAM, 'cogs/reaper')
%w[status pending pipeline recent finished].each do |r|
  require File.join(UPSTREAM, 'dashboard/resources', r)
end

# --- the IRC message ---

User = Struct.new(:nick) do
  def safe_send(msg)
    puts "privmsg #{nick}: #{msg}"
  end
end

Channel = Struct.new(:name, :ranks) do
  def opped?(user)
    ranks[user.nick] == 'o'
  end

  def voiced?(user)
    ranks[user.nick] == 'v'
  end
end

IRCMessage = Struct.new(:user, :channel) do
  def safe_reply(msg, prefix)
    puts "reply #{channel.name} #{prefix ? "#{user.nick}: " : ''}#{msg}"
  end
end

# --- the CouchDB views, over the reference documents ---

class ReferenceCouchdb
  def initialize(dir)
    @sets = {}
    Dir[File.join(dir, 'ignore_sets', '*.json')].sort.each do |f|
      doc = JSON.parse(File.read(f))
      @sets[doc['name']] = doc['patterns'] || []
    end
    @agents = {}
    Dir[File.join(dir, 'user_agents', '*.json')].sort.each do |f|
      doc = JSON.parse(File.read(f))
      (doc['agents'] || []).each do |a|
        a['aliases'].each { |al| @agents[al] ||= a['name'] }
      end
    end
  end

  # ignore_patterns/by_name with keys: one row per pattern, in key order.
  def resolve_ignore_sets(names)
    names.flat_map { |n| (@sets[n] || []).map { |p| [n, p] } }
  end

  # user_agents/by_alias with key: the first row's value.
  def user_agent_for_alias(ua_alias)
    @agents[ua_alias]
  end
end

Redis.silence_deprecations = true
redis = Redis.new(url: ENV.fetch('REDIS_URL'))
brain = Brain.new(%w[http https ftp], redis, ReferenceCouchdb.new(REFERENCE))
channels = Hash.new { |h, k| h[k] = Channel.new(k, {}) }

[Status, Pending, Pipeline, Recent, Finished].each { |r| r.redis = redis }

def show(what, value)
  puts "#{what} #{value}"
end

# The routes of bot/bot.rb for the commands the fixture uses, in its order.
def route(brain, m, text)
  case text
  when CommandPatterns::ARCHIVE then brain.request_archive(m, $1, $2)
  when CommandPatterns::ARCHIVEONLY then brain.request_archive(m, $1, $2, :shallow)
  when /\A!status\s*\Z/ then brain.request_summary(m)
  when /\A!status (#{CommandPatterns::IDENT})\s*\Z/ then brain.find_job($1, m) { |j| brain.request_status(m, j) }
  when CommandPatterns::IGNORE then brain.find_job($1, m) { |j| brain.add_ignore_pattern(m, j, $2) }
  when CommandPatterns::SET_DELAY
    min, max = $2, $3
    brain.find_job($1, m) { |j| brain.set_delay(j, min, max, m) }
  when /\A!abort (#{CommandPatterns::IDENT})\s*\Z/ then brain.find_job($1, m) { |j| brain.initiate_abort(m, j) }
  when /\A!pending\s*\Z/ then brain.show_pending(m)
  when CommandPatterns::WHEREIS then brain.find_job($1, m) { |j| brain.whereis(m, j) }
  else raise "no route for #{text.inspect}"
  end
end

$stdout.sync = true
$stdin.each_line do |line|
  line = line.chomp
  next if line.empty? || line.start_with?('#')
  case line
  when '@finish-notifier'
    FinishNotifier.new(redis: redis).send(:get_latest_completions, redis).each do |chan, msgs|
      msgs.each { |msg| show("finish #{chan}", msg) }
    end
  when '@pipelines'
    PipelineNotifier.new(redis: redis).send(:get_pipelines).sort_by { |p| p['id'].to_s }.each do |p|
      show('pipeline', p.to_a.sort.to_json)
    end
  when /\A@job (\S+)\z/
    job = Job.from_ident($1, redis)
    show("job #{$1}", job ? job.to_status.join(' ') : 'nil')
  when /\A@reaper (\d+)\z/
    reaper = Reaper.allocate
    reaper.instance_variable_set(:@redis, redis)
    $1.to_i.times { reaper.send(:check) }
  when /\A@clock (-?\d+)\z/
    offset = $1.to_i
    Time.singleton_class.prepend(Module.new { define_method(:now) { super() + offset } })
  when '@dashboard'
    show('/status', Status.new.get_status_hash.to_json)
    show('/pending', Pending.new.to_text.inspect)
    show('/pipelines', JSON.parse(Pipeline.new.to_json)['pipelines'].map { |p| p['id'] }.sort.to_json)
    show('/logs/recent', Recent.new.run_query(2).map { |msg| [msg.job.ident, msg.as_json['type']] }.sort.to_json)
    show('/finished', Finished.new.get_finished_jobs.map { |j| [j['ident'], j['aborted'], j['url']] }.sort.to_json)
  else
    nick, rank, chan, text = line.split(' ', 4)
    channel = channels[chan]
    channel.ranks[nick] = rank
    route(brain, IRCMessage.new(User.new(nick), channel), text)
  end
end
