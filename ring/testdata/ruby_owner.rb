# Prints, for each key, the index of the server that Ruby's own clients
# pick: dalli's Dalli::Client (through the grouping its get_multi uses) and
# redis-rb's Redis::Distributed#node_for.
#
# usage: ruby ruby_owner.rb KEYFILE < CONFIGS
# config lines: "dalli host:port:weight ..." or "redis-rb url ...";
# output: one line per config, the owner index of every key.
require 'dalli'
require 'redis'
require 'redis/distributed'
require 'logger'

Dalli.logger = Logger.new(nil)
keys = File.readlines(ARGV[0], chomp: true, encoding: 'UTF-8')
$stdout.sync = false
$stdin.each_line do |line|
  kind, *servers = line.split
  case kind
  when 'dalli'
    names = servers.map { |s| s.split(':')[0, 2].join(':') }
    index = names.each_with_index.to_h
    c = Dalli::Client.new(servers, socket_timeout: 5)
    out = keys.map do |k|
      groups = c.send(:groups_for_keys, k)
      raise "dalli: no server for #{k.inspect}" if groups.key?(nil) || groups.size != 1
      index.fetch(groups.keys.first.name)
    end
    c.close
  when 'redis-rb'
    index = servers.each_with_index.to_h
    d = Redis::Distributed.new(servers)
    out = keys.map { |k| index.fetch(d.node_for(k).id) }
  else
    raise "unknown kind #{kind}"
  end
  puts out.join(' ')
end
