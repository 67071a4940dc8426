# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path('../lib', __dir__)
require 'minitest/autorun'
require 'json'
require 'kura'

module KuraTest
  ROOT = File.expand_path('../..', __dir__)

  def self.testdata(*path)
    File.join(ROOT, 'testdata', *path)
  end

  def self.hex(s)
    [s.gsub(/\s+/, '')].pack('H*')
  end

  GO_ERRORS = {
    'ErrTruncated' => :truncated, 'ErrCorrupt' => :corrupt, 'ErrNotKura' => :not_kura,
    'ErrUnknownSerializer' => :unknown_serializer, 'ErrUnknownCompressor' => :unknown_compressor,
    'ErrUnknownDictionary' => :unknown_dictionary, 'ErrTooLarge' => :too_large, 'ErrBomb' => :bomb,
    'ErrDeserialize' => :deserialize, 'ErrUnsupportedVersion' => :unsupported_version,
    'ErrNotUnderstood' => :not_understood
  }.freeze
end
