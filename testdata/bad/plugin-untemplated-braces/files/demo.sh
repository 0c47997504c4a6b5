#!/bin/sh
echo "${{}}"
