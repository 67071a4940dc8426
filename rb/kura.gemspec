# frozen_string_literal: true

require_relative 'lib/kura/version'

Gem::Specification.new do |s|
  s.name = 'kura'
  s.version = Kura::VERSION
  s.summary = "kura's cache envelope, rings, leases and health for Ruby and Rails"
  s.description = 'Reads and writes the kura envelope shared with the Go and Node packages; ' \
                  'memcached meta-protocol and Redis stores with leases; an ActiveSupport cache store.'
  s.authors = ['kura']
  s.license = 'Apache-2.0'
  s.files = Dir['lib/**/*.rb'] + ['README.md']
  s.require_paths = ['lib']
  s.required_ruby_version = '>= 3.1'
  s.add_dependency 'ffi', '>= 1.15'
  s.add_dependency 'msgpack', '>= 1.4'
end
