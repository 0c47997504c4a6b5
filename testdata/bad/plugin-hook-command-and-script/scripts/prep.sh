#!/bin/sh
echo prep
