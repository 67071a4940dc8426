# frozen_string_literal: true

# kura for Ruby: the envelope, rings, memcached meta client, leases and
# health of the Go and Node packages, so Ruby, Go and Node services share
# one cache. See docs/ruby.md.
module Kura
end

require_relative 'kura/version'
require_relative 'kura/errors'
require_relative 'kura/codec'
require_relative 'kura/ring'
require_relative 'kura/memcache_store'
require_relative 'kura/redis_store'
require_relative 'kura/cache'
