# frozen_string_literal: true

module Kura
  VERSION = '0.1.0'
end
